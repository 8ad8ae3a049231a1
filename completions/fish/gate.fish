complete -c gate -l record -d 'Read the record from FILE instead of stdin' -r -F
complete -c gate -l candidate -d 'The candidate\'s evaluation (a record with `evaluate`, or the evaluation itself); default: the record\'s `evaluate`' -r -F
complete -c gate -l baseline -d 'The baseline\'s evaluation (a record with `evaluate`, or the evaluation itself); default: the record\'s `baseline`' -r -F
complete -c gate -l gate -d 'A gate, overriding the manifest\'s: KEY=VALUE, e.g. auc_min_delta=-0.002' -r
complete -c gate -l slices -d 'Slice columns to gate, overriding manifest.eval.slices' -r
complete -c gate -l rule -d 'The decision rule, overriding manifest.eval.rule' -r -f -a "no-regression\t''
non-inferiority\t''"
complete -c gate -l confidence -d 'The confidence of the paired test, overriding manifest.eval.confidence (0.5 to 1)' -r
complete -c gate -l resamples -d 'Bootstrap resamples for the metrics other than AUC, overriding manifest.eval.resamples' -r
complete -c gate -l memory -d 'Memory the paired test may hold (default: a quarter of the machine\'s). It holds both models\' scores for every row, about 100 bytes a row; rows that do not fit are sorted on disk for AUC gates (the same figures), and refused (exit 2) for the others' -r
complete -c gate -l no-baseline -d 'Allow a first model with no baseline (recorded in the output)'
complete -c gate -s q -l quiet -d 'Print nothing on stderr but errors and failed checks'
complete -c gate -l pretty -d 'Indent the JSON on stdout (default: one line)'
complete -c gate -s h -l help -d 'Print help (see more with \'--help\')'
complete -c gate -s V -l version -d 'Print version'
