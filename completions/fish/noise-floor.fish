complete -c noise-floor -l metric -d 'Dotted path of the metric in each record, e.g. evaluate.overall.auc' -r
complete -c noise-floor -l values -d 'The metric\'s values, comma-separated, instead of records' -r
complete -c noise-floor -l method -d 'How the floor is taken from the spread' -r -f -a "range\t''
std\t''
ci95\t''"
complete -c noise-floor -s q -l quiet -d 'Print nothing on stderr but errors and failed checks'
complete -c noise-floor -l pretty -d 'Indent the JSON on stdout (default: one line)'
complete -c noise-floor -s h -l help -d 'Print help (see more with \'--help\')'
complete -c noise-floor -s V -l version -d 'Print version'
