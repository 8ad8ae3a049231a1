complete -c predict -l model -d 'The model: NAME@ALIAS or NAME@VERSION in the registry, or a model file or training folder' -r -F
complete -c predict -l registry -d 'The registry that resolves NAME@ALIAS (default: RUNFN_REGISTRY, else ./registry)' -r -F
complete -c predict -l in -d 'The snapshot to score: a file or folder, or a store URL' -r
complete -c predict -l out -d 'Where the scores go (Parquet), a path or store URL; written atomically (a part writes into --parts instead)' -r
complete -c predict -l key -d 'A key column to carry beside each score (repeatable; default: the entity and time columns of the record\'s manifest, else of the registered model\'s)' -r
complete -c predict -l device -d 'cpu, cuda or cuda:N' -r
complete -c predict -l memory -d 'Memory for the rows in flight, the model\'s weights aside: it sizes the batches read and the row groups written (at most 65,536 rows each)' -r
complete -c predict -l threads -d 'Threads for reading, scoring and profiling (at most 1024; default: one per core)' -r
complete -c predict -l record -d 'Read the record from FILE instead of stdin (a record is optional)' -r -F
complete -c predict -l part -d 'Do part K of N (0-based: SLURM_ARRAY_TASK_ID, JOB_COMPLETION_INDEX) and write its partial into --parts; the merge (the same command without --part) writes the record' -r
complete -c predict -l parts -d 'The folder of the parts\' partials: written with --part, merged without it' -r -F
complete -c predict -s q -l quiet -d 'Print nothing on stderr but errors and failed checks'
complete -c predict -l pretty -d 'Indent the JSON on stdout (default: one line)'
complete -c predict -s h -l help -d 'Print help (see more with \'--help\')'
complete -c predict -s V -l version -d 'Print version'
