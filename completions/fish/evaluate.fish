complete -c evaluate -l model -d 'Model file, training folder, or a registered model as NAME@ALIAS or NAME@VERSION (default: the record\'s train.weights)' -r -F
complete -c evaluate -l scores -d 'Scores an outside program wrote for the split\'s rows (Parquet or CSV: a key column and `score`, the probability of the positive label), judged in place of a model' -r -F
complete -c evaluate -l key -d 'The column joining --scores to the split\'s rows (default: manifest.eval.row_key, else manifest.data.entity)' -r
complete -c evaluate -l registry -d 'The registry that resolves NAME@ALIAS (default: RUNFN_REGISTRY, else ./registry)' -r -F
complete -c evaluate -l checkpoint -d 'Which of the record\'s weights to score: the final model or the best checkpoint' -r -f -a "final\t'The model file train wrote (train.weights): under early stopping, the best val AUC\'s'
best\t'The kept checkpoint of the best val AUC (train.best.checkpoint)'"
complete -c evaluate -l split -d 'The split to score' -r
complete -c evaluate -l as -d 'Whose result this is: the candidate\'s goes under `evaluate`, the baseline\'s under `baseline`' -r -f -a "candidate\t''
baseline\t''"
complete -c evaluate -l slice -d 'Slice columns, overriding manifest.eval.slices (repeatable)' -r
complete -c evaluate -l bootstrap -d 'Bootstrap resamples for 95% intervals on the overall metrics (at most 100000)' -r
complete -c evaluate -l predictions -d 'Also write every row\'s label and score as CSV (row,label,score) to FILE' -r -F
complete -c evaluate -l row-scores -d 'Where the per-row scores go (Parquet, for gate\'s paired test); a path or store URL. Default: beside the scored model\'s training, row-scores-<evaluate|baseline>-<split>-<weights blake3>-<rows blake3>.parquet (12 hex each)' -r
complete -c evaluate -l shards -d 'The shard folder (default: the record\'s shards.dir)' -r -F
complete -c evaluate -l device -d 'cpu, cuda or cuda:N' -r
complete -c evaluate -l memory -d 'Memory the evaluation may hold beyond one batch (default: a quarter of the machine\'s): the rows the AUCs and the key check sort past it wait on disk under TMPDIR' -r
complete -c evaluate -l record -d 'Read the record from FILE instead of stdin' -r -F
complete -c evaluate -l part -d 'Do part K of N (0-based: SLURM_ARRAY_TASK_ID, JOB_COMPLETION_INDEX) and write its partial into --parts; the merge (the same command without --part) writes the record' -r
complete -c evaluate -l parts -d 'The folder of the parts\' partials: written with --part, merged without it' -r -F
complete -c evaluate -s q -l quiet -d 'Print nothing on stderr but errors and failed checks'
complete -c evaluate -l pretty -d 'Indent the JSON on stdout (default: one line)'
complete -c evaluate -s h -l help -d 'Print help (see more with \'--help\')'
complete -c evaluate -s V -l version -d 'Print version'
