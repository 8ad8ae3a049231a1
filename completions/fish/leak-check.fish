complete -c leak-check -l in -d 'The snapshot (default: the record\'s shards, else manifest.data.snapshot)' -r -F
complete -c leak-check -l shards -d 'A shard folder written by shardify (default: the record\'s shards.dir)' -r -F
complete -c leak-check -l split -d 'A split as NAME=RULE, overriding manifest.data.splits (repeatable)' -r
complete -c leak-check -l entity -d 'Entity column (default: manifest.data.entity)' -r
complete -c leak-check -l time -d 'Time column (default: manifest.data.time)' -r
complete -c leak-check -l label -d 'Label column (default: manifest.data.label)' -r
complete -c leak-check -l text -d 'Text column for near-duplicates (default: manifest.data.text; repeatable)' -r
complete -c leak-check -l jaccard -d 'Jaccard similarity at which two texts count as near-duplicates' -r
complete -c leak-check -l pairs-out -d 'Write every exact and near twin pair found to FILE (JSON Lines)' -r -F
complete -c leak-check -l schema -d 'Schema file fixing column types (raw snapshots only)' -r -F
complete -c leak-check -l memory -d 'Memory the checks may hold (default: a quarter of the machine\'s); key occurrences, texts, band keys, candidate pairs and numbers beyond it are spilled to TMPDIR' -r
complete -c leak-check -l record -d 'Read the record from FILE instead of stdin' -r -F
complete -c leak-check -l part -d 'Do part K of N (0-based: SLURM_ARRAY_TASK_ID, JOB_COMPLETION_INDEX) and write its partial into --parts; the merge (the same command without --part) writes the record' -r
complete -c leak-check -l parts -d 'The folder of the parts\' partials: written with --part, merged without it' -r -F
complete -c leak-check -l reduce -d 'Group the keys (entity ids, row hashes) in range R of M of their hashes over the parts\' runs in --parts, and write that reducer\'s partial there: the merge then adds the reducers\' counts up instead of grouping every key itself' -r
complete -c leak-check -s q -l quiet -d 'Print nothing on stderr but errors and failed checks'
complete -c leak-check -l pretty -d 'Indent the JSON on stdout (default: one line)'
complete -c leak-check -s h -l help -d 'Print help (see more with \'--help\')'
complete -c leak-check -s V -l version -d 'Print version'
