# Print an optspec for argparse to handle cmd's options that are independent of any subcommand.
function __fish_ds_validate_global_optspecs
    string join \n in= shards= schema= record= memory= previous= previous-model= registry= profile-out= explained= part= parts= q/quiet pretty h/help V/version
end

function __fish_ds_validate_needs_command
    # Figure out if the current invocation already has a command.
    set -l cmd (commandline -opc)
    set -e cmd[1]
    argparse -s (__fish_ds_validate_global_optspecs) -- $cmd 2>/dev/null
    or return
    if set -q argv[1]
        # Also print the command, so this can be used to figure out what it is.
        echo $argv[1]
        return 1
    end
    return 0
end

function __fish_ds_validate_using_subcommand
    set -l cmd (__fish_ds_validate_needs_command)
    test -z "$cmd"
    and return 1
    contains -- $cmd[1] $argv
end

complete -c ds-validate -n "__fish_ds_validate_needs_command" -l in -d 'The snapshot: a file or a folder (default: the record\'s shards, else manifest.data.snapshot)' -r -F
complete -c ds-validate -n "__fish_ds_validate_needs_command" -l shards -d 'A shard folder written by shardify (default: the record\'s shards.dir)' -r -F
complete -c ds-validate -n "__fish_ds_validate_needs_command" -l schema -d 'A schema file fixing column types' -r -F
complete -c ds-validate -n "__fish_ds_validate_needs_command" -l record -d 'Read the record from FILE instead of stdin' -r -F
complete -c ds-validate -n "__fish_ds_validate_needs_command" -l memory -d 'Memory the rows being read may take (default: a quarter of the machine\'s): batches are sized by what the widest file\'s rows take once read' -r
complete -c ds-validate -n "__fish_ds_validate_needs_command" -l previous -d 'The previous snapshot\'s profile, to check drift against' -r -F
complete -c ds-validate -n "__fish_ds_validate_needs_command" -l previous-model -d 'Check drift against the profile stored with this model (NAME@ALIAS or NAME@VERSION) in the registry; none there yet (a first run) means no drift checks, said in no_previous' -r
complete -c ds-validate -n "__fish_ds_validate_needs_command" -l registry -d 'The registry for --previous-model (default: RUNFN_REGISTRY, else ./registry)' -r -F
complete -c ds-validate -n "__fish_ds_validate_needs_command" -l profile-out -d 'Where to save this snapshot\'s full profile (default: runs/<run_id>/profile.json)' -r -F
complete -c ds-validate -n "__fish_ds_validate_needs_command" -l explained -d 'Drifts a person has explained: [{"column", "check", "reason"}]' -r -F
complete -c ds-validate -n "__fish_ds_validate_needs_command" -l part -d 'Do part K of N (0-based: SLURM_ARRAY_TASK_ID, JOB_COMPLETION_INDEX) and write its partial into --parts; the merge (the same command without --part) writes the record' -r
complete -c ds-validate -n "__fish_ds_validate_needs_command" -l parts -d 'The folder of the parts\' partials: written with --part, merged without it' -r -F
complete -c ds-validate -n "__fish_ds_validate_needs_command" -s q -l quiet -d 'Print nothing on stderr but errors and failed checks'
complete -c ds-validate -n "__fish_ds_validate_needs_command" -l pretty -d 'Indent the JSON on stdout (default: one line)'
complete -c ds-validate -n "__fish_ds_validate_needs_command" -s h -l help -d 'Print help (see more with \'--help\')'
complete -c ds-validate -n "__fish_ds_validate_needs_command" -s V -l version -d 'Print version'
complete -c ds-validate -n "__fish_ds_validate_needs_command" -f -a "profile" -d 'Profile a snapshot (or one file of it) and print the full, mergeable profile'
complete -c ds-validate -n "__fish_ds_validate_needs_command" -f -a "merge" -d 'Merge profiles of parts of a snapshot into one'
complete -c ds-validate -n "__fish_ds_validate_needs_command" -f -a "compare" -d 'Check a profile against a previous one and print a record with the `validate` section'
complete -c ds-validate -n "__fish_ds_validate_needs_command" -f -a "help" -d 'Print this message or the help of the given subcommand(s)'
complete -c ds-validate -n "__fish_ds_validate_using_subcommand profile" -l in -d 'The snapshot: a file or a folder (default: the record\'s shards, else manifest.data.snapshot)' -r -F
complete -c ds-validate -n "__fish_ds_validate_using_subcommand profile" -l shards -d 'A shard folder written by shardify (default: the record\'s shards.dir)' -r -F
complete -c ds-validate -n "__fish_ds_validate_using_subcommand profile" -l schema -d 'A schema file fixing column types' -r -F
complete -c ds-validate -n "__fish_ds_validate_using_subcommand profile" -l record -d 'Read the record from FILE instead of stdin' -r -F
complete -c ds-validate -n "__fish_ds_validate_using_subcommand profile" -l memory -d 'Memory the rows being read may take (default: a quarter of the machine\'s): batches are sized by what the widest file\'s rows take once read' -r
complete -c ds-validate -n "__fish_ds_validate_using_subcommand profile" -l label -d 'The label column (default: manifest.data.label of a record given with --record)' -r
complete -c ds-validate -n "__fish_ds_validate_using_subcommand profile" -s o -l output -d 'Write the profile to FILE (atomically) instead of stdout' -r -F
complete -c ds-validate -n "__fish_ds_validate_using_subcommand profile" -s q -l quiet -d 'Print nothing on stderr but errors and failed checks'
complete -c ds-validate -n "__fish_ds_validate_using_subcommand profile" -l pretty -d 'Indent the JSON on stdout (default: one line)'
complete -c ds-validate -n "__fish_ds_validate_using_subcommand profile" -s h -l help -d 'Print help'
complete -c ds-validate -n "__fish_ds_validate_using_subcommand merge" -s o -l output -d 'Write the merged profile to FILE (atomically) instead of stdout' -r -F
complete -c ds-validate -n "__fish_ds_validate_using_subcommand merge" -s q -l quiet -d 'Print nothing on stderr but errors and failed checks'
complete -c ds-validate -n "__fish_ds_validate_using_subcommand merge" -l pretty -d 'Indent the JSON on stdout (default: one line)'
complete -c ds-validate -n "__fish_ds_validate_using_subcommand merge" -s h -l help -d 'Print help'
complete -c ds-validate -n "__fish_ds_validate_using_subcommand compare" -l previous -r -F
complete -c ds-validate -n "__fish_ds_validate_using_subcommand compare" -l current -r -F
complete -c ds-validate -n "__fish_ds_validate_using_subcommand compare" -l label -r
complete -c ds-validate -n "__fish_ds_validate_using_subcommand compare" -l explained -r -F
complete -c ds-validate -n "__fish_ds_validate_using_subcommand compare" -l manifest -d 'A manifest (YAML or JSON) whose `validate` thresholds, `fail_on`, `data` roles and `config.features` apply; a drift-only manifest (data and validate) is enough' -r -F
complete -c ds-validate -n "__fish_ds_validate_using_subcommand compare" -l record -d 'A run record whose manifest applies, as with --manifest' -r -F
complete -c ds-validate -n "__fish_ds_validate_using_subcommand compare" -s q -l quiet -d 'Print nothing on stderr but errors and failed checks'
complete -c ds-validate -n "__fish_ds_validate_using_subcommand compare" -l pretty -d 'Indent the JSON on stdout (default: one line)'
complete -c ds-validate -n "__fish_ds_validate_using_subcommand compare" -s h -l help -d 'Print help'
complete -c ds-validate -n "__fish_ds_validate_using_subcommand help; and not __fish_seen_subcommand_from profile merge compare help" -f -a "profile" -d 'Profile a snapshot (or one file of it) and print the full, mergeable profile'
complete -c ds-validate -n "__fish_ds_validate_using_subcommand help; and not __fish_seen_subcommand_from profile merge compare help" -f -a "merge" -d 'Merge profiles of parts of a snapshot into one'
complete -c ds-validate -n "__fish_ds_validate_using_subcommand help; and not __fish_seen_subcommand_from profile merge compare help" -f -a "compare" -d 'Check a profile against a previous one and print a record with the `validate` section'
complete -c ds-validate -n "__fish_ds_validate_using_subcommand help; and not __fish_seen_subcommand_from profile merge compare help" -f -a "help" -d 'Print this message or the help of the given subcommand(s)'
