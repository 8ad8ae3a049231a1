complete -c demo-data -l out -d 'Folder for the part files (created if missing)' -r -F
complete -c demo-data -l rows -d 'Number of rows in all' -r
complete -c demo-data -l seed -d 'Seed of every random choice' -r
complete -c demo-data -l parts -d 'Number of part files' -r
complete -c demo-data -l format -d 'File format' -r -f -a "csv\t''
jsonl\t''"
complete -c demo-data -l trap-future-feature -d 'Rows whose ticket count was taken after the label date' -r
complete -c demo-data -l trap-entity-overlap -d 'Customers that reappear in the last two months under the same id' -r
complete -c demo-data -l trap-duplicate-notes -d 'Late rows with a restyled copy of an earlier note, and as many with a near copy' -r
complete -c demo-data -l trap-exact-duplicates -d 'Late rows that copy every feature of an earlier row' -r
complete -c demo-data -l bad-rows -d 'Rows with an unparseable monthly_spend' -r
complete -c demo-data -l trap-missing-new-accounts -d 'New accounts, about half of them with no logins_30d, and those churn more' -r
complete -c demo-data -l trap-label-proxy -d 'Add an account_closed column that gives the label away'
complete -c demo-data -l drift -d 'A drifted snapshot: higher spend, more central region, higher label rate'
complete -c demo-data -s q -l quiet -d 'Print nothing on stderr but errors and failed checks'
complete -c demo-data -l pretty -d 'Indent the JSON on stdout (default: one line)'
complete -c demo-data -s h -l help -d 'Print help (see more with \'--help\')'
complete -c demo-data -s V -l version -d 'Print version'
