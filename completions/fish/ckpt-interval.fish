complete -c ckpt-interval -l cost -d 'Seconds to write one checkpoint (default: the record\'s train.ckpt_mean_s)' -r
complete -c ckpt-interval -l mtbf -d 'Mean time between failures of the whole job, in seconds' -r
complete -c ckpt-interval -l failures -d 'A file of failure times (RFC 3339 or Unix seconds, one per line); MTBF = span / gaps' -r -F
complete -c ckpt-interval -l node-mtbf -d 'Mean time between failures of one node, in seconds (with --nodes)' -r
complete -c ckpt-interval -l nodes -d 'Number of nodes; the job fails when any of them does' -r
complete -c ckpt-interval -l step-time -d 'Seconds per training step, to give the interval in steps (default: train.step_time_s)' -r
complete -c ckpt-interval -l restart -d 'Seconds to restart after a failure' -r
complete -c ckpt-interval -l blocking -d 'Seconds of the checkpoint that block training (asynchronous checkpoints; default: the record\'s train.ckpt_blocking_s when train.ckpt_async)' -r
complete -c ckpt-interval -l method -d 'Which optimum to use for interval_s' -r -f -a "young\t''
daly\t''"
complete -c ckpt-interval -l measured -d 'A record of an earlier training of the same job (train\'s output): its measured checkpoint cost, blocking time and step time stand in for flags the run does not give' -r -F
complete -c ckpt-interval -l record -d 'Read the record from FILE instead of stdin' -r -F
complete -c ckpt-interval -s q -l quiet -d 'Print nothing on stderr but errors and failed checks'
complete -c ckpt-interval -l pretty -d 'Indent the JSON on stdout (default: one line)'
complete -c ckpt-interval -s h -l help -d 'Print help (see more with \'--help\')'
complete -c ckpt-interval -s V -l version -d 'Print version'
