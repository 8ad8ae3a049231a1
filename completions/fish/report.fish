# Print an optspec for argparse to handle cmd's options that are independent of any subcommand.
function __fish_report_global_optspecs
    string join \n html= tensorboard= max-gap= input-bound= fail-on-flag registry= model= alias= q/quiet pretty h/help V/version
end

function __fish_report_needs_command
    # Figure out if the current invocation already has a command.
    set -l cmd (commandline -opc)
    set -e cmd[1]
    argparse -s (__fish_report_global_optspecs) -- $cmd 2>/dev/null
    or return
    if set -q argv[1]
        # Also print the command, so this can be used to figure out what it is.
        echo $argv[1]
        return 1
    end
    return 0
end

function __fish_report_using_subcommand
    set -l cmd (__fish_report_needs_command)
    test -z "$cmd"
    and return 1
    contains -- $cmd[1] $argv
end

complete -c report -n "__fish_report_needs_command" -l html -d 'Write the self-contained HTML page to FILE' -r -F
complete -c report -n "__fish_report_needs_command" -l tensorboard -d 'Write TensorBoard event files of the curves under DIR (one folder per seed)' -r -F
complete -c report -n "__fish_report_needs_command" -l max-gap -d 'Flag a prediction whose measured value differs from it by more than this fraction' -r
complete -c report -n "__fish_report_needs_command" -l input-bound -d 'Flag a training run that waited for data more than this share of its step time' -r
complete -c report -n "__fish_report_needs_command" -l registry -d 'The registry (default: RUNFN_REGISTRY, else ./registry)' -r -F
complete -c report -n "__fish_report_needs_command" -l model -d 'The model\'s name in the registry (default: from the records: what the night registered, the baseline it compared, the model drift was measured against)' -r
complete -c report -n "__fish_report_needs_command" -l alias -d 'The alias the pipeline promotes to' -r
complete -c report -n "__fish_report_needs_command" -l fail-on-flag -d 'Exit 1 when any pair is flagged'
complete -c report -n "__fish_report_needs_command" -s q -l quiet -d 'Print nothing on stderr but errors and failed checks'
complete -c report -n "__fish_report_needs_command" -l pretty -d 'Indent the JSON on stdout (default: one line)'
complete -c report -n "__fish_report_needs_command" -s h -l help -d 'Print help (see more with \'--help\')'
complete -c report -n "__fish_report_needs_command" -s V -l version -d 'Print version'
complete -c report -n "__fish_report_needs_command" -a "history" -d 'The nights together: a table and a plot over night folders, with the registry\'s versions and alias moves'
complete -c report -n "__fish_report_needs_command" -a "help" -d 'Print this message or the help of the given subcommand(s)'
complete -c report -n "__fish_report_using_subcommand history" -l html -d 'Write the self-contained HTML page to FILE' -r -F
complete -c report -n "__fish_report_using_subcommand history" -l registry -d 'The registry (default: RUNFN_REGISTRY, else ./registry)' -r -F
complete -c report -n "__fish_report_using_subcommand history" -l model -d 'The model\'s name in the registry (default: from the records: what the night registered, the baseline it compared, the model drift was measured against)' -r
complete -c report -n "__fish_report_using_subcommand history" -l alias -d 'The alias the pipeline promotes to' -r
complete -c report -n "__fish_report_using_subcommand history" -s q -l quiet -d 'Print nothing on stderr but errors and failed checks'
complete -c report -n "__fish_report_using_subcommand history" -l pretty -d 'Indent the JSON on stdout (default: one line)'
complete -c report -n "__fish_report_using_subcommand history" -s h -l help -d 'Print help (see more with \'--help\')'
complete -c report -n "__fish_report_using_subcommand help; and not __fish_seen_subcommand_from history help" -f -a "history" -d 'The nights together: a table and a plot over night folders, with the registry\'s versions and alias moves'
complete -c report -n "__fish_report_using_subcommand help; and not __fish_seen_subcommand_from history help" -f -a "help" -d 'Print this message or the help of the given subcommand(s)'
