complete -c shardify -l in -d 'The snapshot, a path or a store URL (default: manifest.data.snapshot)' -r -F
complete -c shardify -l out -d 'Output folder or store URL (default: runs/<run_id>/shards)' -r -F
complete -c shardify -l seed -d 'Shuffle seed (default: manifest.seed)' -r
complete -c shardify -l split -d 'A split as NAME=RULE, overriding manifest.data.splits (repeatable)' -r
complete -c shardify -l time -d 'The time column for bare periods such as `2026-08` (default: manifest.data.time)' -r
complete -c shardify -l schema -d 'A schema file fixing column types: {"columns": {"name": "int64|float64|bool|date|timestamp|string"}}' -r -F
complete -c shardify -l memory -d 'Memory the shuffle may use' -r
complete -c shardify -l shard-rows -d 'Rows per shard' -r
complete -c shardify -l row-group-rows -d 'Rows per Parquet row group' -r
complete -c shardify -l zstd-level -d 'zstd level (1 fastest .. 22 smallest)' -r
complete -c shardify -l max-unsplit-fraction -d 'The share of rows that may fall in no split before the run fails (default: manifest.data.max_unsplit_fraction, else 0.01)' -r
complete -c shardify -l record -d 'Read the record from FILE instead of stdin' -r -F
complete -c shardify -l part -d 'Do part K of N (0-based: SLURM_ARRAY_TASK_ID, JOB_COMPLETION_INDEX) and write its partial into --parts; the merge (the same command without --part) writes the record' -r
complete -c shardify -l parts -d 'The folder of the parts\' partials: written with --part, merged without it' -r -F
complete -c shardify -l reduce -d 'Be reducer R of M (0-based): write R\'s run of the output shards from the partials in --parts into --out (the array between the parts and the merge)' -r
complete -c shardify -s q -l quiet -d 'Print nothing on stderr but errors and failed checks'
complete -c shardify -l pretty -d 'Indent the JSON on stdout (default: one line)'
complete -c shardify -s h -l help -d 'Print help (see more with \'--help\')'
complete -c shardify -s V -l version -d 'Print version'
