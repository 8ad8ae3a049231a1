# Print an optspec for argparse to handle cmd's options that are independent of any subcommand.
function __fish_mf_hash_global_optspecs
    string join \n format= check= commit-from-git data-digest= print= lint drift-only part= parts= q/quiet pretty h/help V/version
end

function __fish_mf_hash_needs_command
    # Figure out if the current invocation already has a command.
    set -l cmd (commandline -opc)
    set -e cmd[1]
    argparse -s (__fish_mf_hash_global_optspecs) -- $cmd 2>/dev/null
    or return
    if set -q argv[1]
        # Also print the command, so this can be used to figure out what it is.
        echo $argv[1]
        return 1
    end
    return 0
end

function __fish_mf_hash_using_subcommand
    set -l cmd (__fish_mf_hash_needs_command)
    test -z "$cmd"
    and return 1
    contains -- $cmd[1] $argv
end

complete -c mf-hash -n "__fish_mf_hash_needs_command" -l format -d 'Input format (default: from the extension, else JSON when it starts with `{`)' -r -f -a "json\t''
yaml\t''"
complete -c mf-hash -n "__fish_mf_hash_needs_command" -l check -d 'Exit 1 unless the manifest hashes to HASH' -r
complete -c mf-hash -n "__fish_mf_hash_needs_command" -l data-digest -d 'Add a content digest of this data snapshot (folder, file or store URL such as s3://bucket/prefix); verified against a `@blake3:` snapshot id' -r -F
complete -c mf-hash -n "__fish_mf_hash_needs_command" -l print -d 'Print one field of the manifest as a plain line instead of the record: `snapshot` (the path part of data.snapshot, as the data tools read it) or `alert` (empty when unset)' -r -f -a "snapshot\t''
alert\t''"
complete -c mf-hash -n "__fish_mf_hash_needs_command" -l part -d 'Do part K of N (0-based: SLURM_ARRAY_TASK_ID, JOB_COMPLETION_INDEX) and write its partial into --parts; the merge (the same command without --part) writes the record' -r
complete -c mf-hash -n "__fish_mf_hash_needs_command" -l parts -d 'The folder of the parts\' partials: written with --part, merged without it' -r -F
complete -c mf-hash -n "__fish_mf_hash_needs_command" -l commit-from-git -d 'Set code.commit to the git HEAD of the current folder; refuse a dirty work tree'
complete -c mf-hash -n "__fish_mf_hash_needs_command" -l lint -d 'Lint only, as a template: the snapshot may be one `pin` fills in (no immutable id yet)'
complete -c mf-hash -n "__fish_mf_hash_needs_command" -l drift-only -d 'A manifest for drift checks alone (ds-validate): `data` and `validate` suffice; code, seed, label and splits are checked only where present'
complete -c mf-hash -n "__fish_mf_hash_needs_command" -s q -l quiet -d 'Print nothing on stderr but errors and failed checks'
complete -c mf-hash -n "__fish_mf_hash_needs_command" -l pretty -d 'Indent the JSON on stdout (default: one line)'
complete -c mf-hash -n "__fish_mf_hash_needs_command" -s h -l help -d 'Print help (see more with \'--help\')'
complete -c mf-hash -n "__fish_mf_hash_needs_command" -s V -l version -d 'Print version'
complete -c mf-hash -n "__fish_mf_hash_needs_command" -a "pin" -d 'Pin a snapshot: write the manifest with data.snapshot = <snapshot>@blake3:<digest>'
complete -c mf-hash -n "__fish_mf_hash_needs_command" -a "help" -d 'Print this message or the help of the given subcommand(s)'
complete -c mf-hash -n "__fish_mf_hash_using_subcommand pin" -l snapshot -d 'The snapshot to pin, a folder or file (default: the manifest\'s data.snapshot)' -r -F
complete -c mf-hash -n "__fish_mf_hash_using_subcommand pin" -l out -d 'Where to write the pinned manifest, its folder made if missing (default: over MANIFEST, atomically)' -r -F
complete -c mf-hash -n "__fish_mf_hash_using_subcommand pin" -s q -l quiet -d 'Print nothing on stderr but errors and failed checks'
complete -c mf-hash -n "__fish_mf_hash_using_subcommand pin" -l pretty -d 'Indent the JSON on stdout (default: one line)'
complete -c mf-hash -n "__fish_mf_hash_using_subcommand pin" -s h -l help -d 'Print help'
complete -c mf-hash -n "__fish_mf_hash_using_subcommand help; and not __fish_seen_subcommand_from pin help" -f -a "pin" -d 'Pin a snapshot: write the manifest with data.snapshot = <snapshot>@blake3:<digest>'
complete -c mf-hash -n "__fish_mf_hash_using_subcommand help; and not __fish_seen_subcommand_from pin help" -f -a "help" -d 'Print this message or the help of the given subcommand(s)'
