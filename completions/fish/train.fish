complete -c train -l out -d 'Output folder, or a store URL such as s3://bucket/prefix: the run then works in a cache folder, publishes each checkpoint as it is written, resumes from the store\'s newest one, and publishes the weights and metrics at the end (default: runs/<run_id>/train-seed<seed>)' -r -F
complete -c train -l seed -d 'Seed for initialisation, data order and dropout (default: manifest.seed)' -r
complete -c train -l shards -d 'The shard folder (default: the record\'s shards.dir)' -r -F
complete -c train -l device -d 'cpu, cuda or cuda:N. CUDA needs the full libtorch install. In a distributed job plain `cuda` means cuda:LOCAL_RANK' -r
complete -c train -l threads -d 'libtorch intra-op threads (default: the checkpoint\'s when resuming, else one per core but one, which is left to the input pipeline)' -r
complete -c train -l prefetch -d 'Batches the input pipeline prepares ahead' -r
complete -c train -l cache -d 'Keep the decoded train split in memory when it fits in SIZE (0: decode every epoch)' -r
complete -c train -l record -d 'Read the record from FILE instead of stdin' -r -F
complete -c train -l nproc-per-node -d 'Start N ranks of this job on this machine, as torchrun would: each gets RANK, WORLD_SIZE, LOCAL_RANK, LOCAL_WORLD_SIZE, MASTER_ADDR and MASTER_PORT. Signals are forwarded to them, and when one fails the others are stopped' -r
complete -c train -l master-port -d 'Rendezvous port for --nproc-per-node, where this process hosts the ranks\' store (default: MASTER_PORT, else a free port the system picks)' -r
complete -c train -l dist-backend -d 'Collective backend of a distributed job: auto (NCCL on CUDA, Gloo on the CPU), gloo or nccl' -r -f -a "auto\t''
gloo\t''
nccl\t''"
complete -c train -l dist-timeout -d 'Seconds a rank waits for its peers, at the rendezvous and in every collective, before it fails: a rank that died or hung ends the job within this time' -r
complete -c train -l cpu-affinity -d 'How ranks on one machine share its CPUs: split (each pinned to an equal share of the CPUs this process may use) or none (the scheduler decides). Two jobs on one machine should each get their own CPUs through taskset or the batch system, or use none' -r -f -a "split\t''
none\t''"
complete -c train -l bucket-mb -d 'Gradient all-reduce bucket size in MiB: one collective per bucket of the flat gradient' -r
complete -c train -l bf16 -d 'Matrix products in bf16 on CUDA (weights, optimizer and loss stay fp32)'
complete -c train -l fresh -d 'Discard existing checkpoints in OUT and start from step 0'
complete -c train -l sync-checkpoints -d 'Wait for each checkpoint\'s whole save instead of writing it in the background'
complete -c train -s q -l quiet -d 'Print nothing on stderr but errors and failed checks'
complete -c train -l pretty -d 'Indent the JSON on stdout (default: one line)'
complete -c train -s h -l help -d 'Print help (see more with \'--help\')'
complete -c train -s V -l version -d 'Print version'
