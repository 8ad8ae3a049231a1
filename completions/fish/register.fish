# Print an optspec for argparse to handle cmd's options that are independent of any subcommand.
function __fish_register_global_optspecs
    string join \n registry= name= promote= allow-ungated reason= record= artifacts= q/quiet pretty h/help V/version
end

function __fish_register_needs_command
    # Figure out if the current invocation already has a command.
    set -l cmd (commandline -opc)
    set -e cmd[1]
    argparse -s (__fish_register_global_optspecs) -- $cmd 2>/dev/null
    or return
    if set -q argv[1]
        # Also print the command, so this can be used to figure out what it is.
        echo $argv[1]
        return 1
    end
    return 0
end

function __fish_register_using_subcommand
    set -l cmd (__fish_register_needs_command)
    test -z "$cmd"
    and return 1
    contains -- $cmd[1] $argv
end

complete -c register -n "__fish_register_needs_command" -l registry -d 'The registry folder (default: RUNFN_REGISTRY, else ./registry)' -r -F
complete -c register -n "__fish_register_needs_command" -l name -d 'The model\'s name (default: manifest.name, else manifest.run_id)' -r
complete -c register -n "__fish_register_needs_command" -l promote -d 'Point this alias (for example prod) at the new entry' -r
complete -c register -n "__fish_register_needs_command" -l reason -d 'Why: stored with an ungated entry, or with an alias move' -r
complete -c register -n "__fish_register_needs_command" -l record -d 'Read the record from FILE instead of stdin' -r -F
complete -c register -n "__fish_register_needs_command" -l artifacts -d 'A folder the model or scores file may also come from, besides the working folder (repeatable; a store URL allows nothing more)' -r
complete -c register -n "__fish_register_needs_command" -l allow-ungated -d 'Register even though the record\'s gate is missing or failed (needs --reason)'
complete -c register -n "__fish_register_needs_command" -s q -l quiet -d 'Print nothing on stderr but errors and failed checks'
complete -c register -n "__fish_register_needs_command" -l pretty -d 'Indent the JSON on stdout (default: one line)'
complete -c register -n "__fish_register_needs_command" -s h -l help -d 'Print help (see more with \'--help\')'
complete -c register -n "__fish_register_needs_command" -s V -l version -d 'Print version'
complete -c register -n "__fish_register_needs_command" -f -a "alias" -d 'Point NAME@ALIAS at VERSION (the move is recorded with --reason)'
complete -c register -n "__fish_register_needs_command" -f -a "resolve" -d 'Print the entry NAME@ALIAS or NAME@VERSION names, with its weights path and hash'
complete -c register -n "__fish_register_needs_command" -f -a "profile" -d 'Print the data profile stored with the entry NAME@ALIAS or NAME@VERSION names (the snapshot it was trained on, as ds-validate profiled it), for ds-validate --previous'
complete -c register -n "__fish_register_needs_command" -f -a "list" -d 'List every entry, or those of NAME'
complete -c register -n "__fish_register_needs_command" -f -a "show" -d 'Print one entry'
complete -c register -n "__fish_register_needs_command" -f -a "history" -d 'Print the alias moves of NAME, oldest first'
complete -c register -n "__fish_register_needs_command" -f -a "verify" -d 'Re-hash every blob; report missing or corrupt ones and aliases pointing nowhere'
complete -c register -n "__fish_register_needs_command" -f -a "help" -d 'Print this message or the help of the given subcommand(s)'
complete -c register -n "__fish_register_using_subcommand alias" -l registry -d 'The registry folder (default: RUNFN_REGISTRY, else ./registry)' -r -F
complete -c register -n "__fish_register_using_subcommand alias" -l reason -d 'Why: stored with an ungated entry, or with an alias move' -r
complete -c register -n "__fish_register_using_subcommand alias" -s q -l quiet -d 'Print nothing on stderr but errors and failed checks'
complete -c register -n "__fish_register_using_subcommand alias" -l pretty -d 'Indent the JSON on stdout (default: one line)'
complete -c register -n "__fish_register_using_subcommand alias" -s h -l help -d 'Print help'
complete -c register -n "__fish_register_using_subcommand resolve" -l registry -d 'The registry folder (default: RUNFN_REGISTRY, else ./registry)' -r -F
complete -c register -n "__fish_register_using_subcommand resolve" -l reason -d 'Why: stored with an ungated entry, or with an alias move' -r
complete -c register -n "__fish_register_using_subcommand resolve" -s q -l quiet -d 'Print nothing on stderr but errors and failed checks'
complete -c register -n "__fish_register_using_subcommand resolve" -l pretty -d 'Indent the JSON on stdout (default: one line)'
complete -c register -n "__fish_register_using_subcommand resolve" -s h -l help -d 'Print help'
complete -c register -n "__fish_register_using_subcommand profile" -l registry -d 'The registry folder (default: RUNFN_REGISTRY, else ./registry)' -r -F
complete -c register -n "__fish_register_using_subcommand profile" -l reason -d 'Why: stored with an ungated entry, or with an alias move' -r
complete -c register -n "__fish_register_using_subcommand profile" -s q -l quiet -d 'Print nothing on stderr but errors and failed checks'
complete -c register -n "__fish_register_using_subcommand profile" -l pretty -d 'Indent the JSON on stdout (default: one line)'
complete -c register -n "__fish_register_using_subcommand profile" -s h -l help -d 'Print help'
complete -c register -n "__fish_register_using_subcommand list" -l registry -d 'The registry folder (default: RUNFN_REGISTRY, else ./registry)' -r -F
complete -c register -n "__fish_register_using_subcommand list" -l reason -d 'Why: stored with an ungated entry, or with an alias move' -r
complete -c register -n "__fish_register_using_subcommand list" -s q -l quiet -d 'Print nothing on stderr but errors and failed checks'
complete -c register -n "__fish_register_using_subcommand list" -l pretty -d 'Indent the JSON on stdout (default: one line)'
complete -c register -n "__fish_register_using_subcommand list" -s h -l help -d 'Print help'
complete -c register -n "__fish_register_using_subcommand show" -l registry -d 'The registry folder (default: RUNFN_REGISTRY, else ./registry)' -r -F
complete -c register -n "__fish_register_using_subcommand show" -l reason -d 'Why: stored with an ungated entry, or with an alias move' -r
complete -c register -n "__fish_register_using_subcommand show" -s q -l quiet -d 'Print nothing on stderr but errors and failed checks'
complete -c register -n "__fish_register_using_subcommand show" -l pretty -d 'Indent the JSON on stdout (default: one line)'
complete -c register -n "__fish_register_using_subcommand show" -s h -l help -d 'Print help'
complete -c register -n "__fish_register_using_subcommand history" -l registry -d 'The registry folder (default: RUNFN_REGISTRY, else ./registry)' -r -F
complete -c register -n "__fish_register_using_subcommand history" -l reason -d 'Why: stored with an ungated entry, or with an alias move' -r
complete -c register -n "__fish_register_using_subcommand history" -s q -l quiet -d 'Print nothing on stderr but errors and failed checks'
complete -c register -n "__fish_register_using_subcommand history" -l pretty -d 'Indent the JSON on stdout (default: one line)'
complete -c register -n "__fish_register_using_subcommand history" -s h -l help -d 'Print help'
complete -c register -n "__fish_register_using_subcommand verify" -l registry -d 'The registry folder (default: RUNFN_REGISTRY, else ./registry)' -r -F
complete -c register -n "__fish_register_using_subcommand verify" -l reason -d 'Why: stored with an ungated entry, or with an alias move' -r
complete -c register -n "__fish_register_using_subcommand verify" -s q -l quiet -d 'Print nothing on stderr but errors and failed checks'
complete -c register -n "__fish_register_using_subcommand verify" -l pretty -d 'Indent the JSON on stdout (default: one line)'
complete -c register -n "__fish_register_using_subcommand verify" -s h -l help -d 'Print help'
complete -c register -n "__fish_register_using_subcommand help; and not __fish_seen_subcommand_from alias resolve profile list show history verify help" -f -a "alias" -d 'Point NAME@ALIAS at VERSION (the move is recorded with --reason)'
complete -c register -n "__fish_register_using_subcommand help; and not __fish_seen_subcommand_from alias resolve profile list show history verify help" -f -a "resolve" -d 'Print the entry NAME@ALIAS or NAME@VERSION names, with its weights path and hash'
complete -c register -n "__fish_register_using_subcommand help; and not __fish_seen_subcommand_from alias resolve profile list show history verify help" -f -a "profile" -d 'Print the data profile stored with the entry NAME@ALIAS or NAME@VERSION names (the snapshot it was trained on, as ds-validate profiled it), for ds-validate --previous'
complete -c register -n "__fish_register_using_subcommand help; and not __fish_seen_subcommand_from alias resolve profile list show history verify help" -f -a "list" -d 'List every entry, or those of NAME'
complete -c register -n "__fish_register_using_subcommand help; and not __fish_seen_subcommand_from alias resolve profile list show history verify help" -f -a "show" -d 'Print one entry'
complete -c register -n "__fish_register_using_subcommand help; and not __fish_seen_subcommand_from alias resolve profile list show history verify help" -f -a "history" -d 'Print the alias moves of NAME, oldest first'
complete -c register -n "__fish_register_using_subcommand help; and not __fish_seen_subcommand_from alias resolve profile list show history verify help" -f -a "verify" -d 'Re-hash every blob; report missing or corrupt ones and aliases pointing nowhere'
complete -c register -n "__fish_register_using_subcommand help; and not __fish_seen_subcommand_from alias resolve profile list show history verify help" -f -a "help" -d 'Print this message or the help of the given subcommand(s)'
