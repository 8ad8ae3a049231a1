//! The training input pipeline. The order of epoch `e` is a pure function of (seed, e), whatever
//! the number of ranks:
//! - shards are read in pieces ([`shard_pieces`]: a shard of more than `P` rows is cut into
//!   consecutive pieces of at most `P`, a function of the global batch alone);
//! - every piece's rows are cut into `L` lanes, contiguous row ranges of equal size (`L` is the
//!   largest divisor of the global batch up to 64, a function of the batch alone);
//! - lane `l`'s stream is the pieces in a permuted order (the same for every lane), each
//!   contributing its lane-`l` rows in a permuted order;
//! - global batch `k` is rows `k*B/L..(k+1)*B/L` of lane 0's stream, then of lane 1's, and so on;
//!   an epoch ends when the shortest lane runs out (the short tails are dropped).
//!
//! A rank's slice of every batch (`rank*B/W..(rank+1)*B/W`) is then made of whole lanes when
//! `W` divides `L`, so it reads only those lanes, one contiguous row range of each piece:
//! about 1/W of the rows, decoded and cached by that rank alone, while the batches stay those of
//! one process. Resuming at (epoch, position) replays exactly the batches the uninterrupted run
//! would have seen.
//!
//! Pieces are decoded and preprocessed on background threads, a few ahead, and batches wait
//! in a bounded queue, so the training loop only waits when the disk cannot keep up; the time it
//! waits is measured by the caller around `next`.

use std::collections::{HashMap, VecDeque};
use std::ops::Range;
use std::path::PathBuf;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use std::thread::JoinHandle;

use anyhow::{Result, anyhow, bail};
use rand::RngExt;
use tch::{Device, Tensor};

use crate::batch_queue::{self, Receiver, Sender};
use crate::features::{FeatureBlock, Lookup, Preprocess};
use crate::seeds;
use crate::shard_pieces::{self, Piece};
use crate::shard_reader::ShardReader;

#[derive(Debug, Clone)]
pub struct ShardSet {
    pub paths: Vec<PathBuf>,
    pub rows: Vec<u64>,
}

impl ShardSet {
    pub fn total_rows(&self) -> u64 {
        self.rows.iter().sum()
    }
}

/// Lanes of a global batch of `batch` rows: its largest divisor up to 64.
pub fn lane_count(batch: usize) -> usize {
    (1..=64.min(batch.max(1)))
        .rev()
        .find(|l| batch.is_multiple_of(*l))
        .unwrap_or(1)
}

/// Rows of a piece of `rows` rows that lane `lane` of `lanes` holds.
fn lane_rows(rows: u64, lane: usize, lanes: usize) -> Range<u64> {
    let at = |l: usize| (rows as u128 * l as u128 / lanes as u128) as u64;
    at(lane)..at(lane + 1)
}

/// Full batches an epoch of `pieces` holds with global batch `batch`: as many as the shortest
/// lane fills.
pub fn batches_per_epoch(pieces: &[Piece], batch: usize) -> u64 {
    let lanes = lane_count(batch);
    let per_lane = (batch / lanes) as u64;
    (0..lanes)
        .map(|l| {
            pieces
                .iter()
                .map(|p| {
                    let r = lane_rows(p.len(), l, lanes);
                    r.end - r.start
                })
                .sum::<u64>()
                / per_lane
        })
        .min()
        .unwrap_or(0)
}

#[derive(Debug, Clone)]
pub struct LoaderOptions {
    /// Rows per global batch.
    pub batch: usize,
    /// Rows a piece of a shard holds at most: part of the data order, so a run and its resume
    /// must agree (train uses [`shard_pieces::piece_rows`] of the batch).
    pub piece_rows: u64,
    pub seed: u64,
    pub start_epoch: u64,
    /// Batches of `start_epoch` already consumed.
    pub start_position: u64,
    /// This process's share of every batch: (rank, world size).
    pub rank: usize,
    pub world: usize,
    /// Batches prepared ahead.
    pub prefetch: usize,
    /// Shards decoded ahead, in parallel.
    pub lookahead: usize,
    /// Pin host memory for fast non-blocking copies to this CUDA device.
    pub pin_for: Option<Device>,
    /// Keep the decoded split in memory when it needs at most this many bytes.
    pub cache_bytes: usize,
    /// Dropout probability and the widths of the layers it applies to: the loader draws the
    /// keep-masks of every batch here, off the training thread.
    pub dropout: f64,
    pub dropout_widths: Vec<i64>,
}

#[derive(Debug)]
pub struct Batch {
    pub epoch: u64,
    /// Index of the batch within its epoch (0-based).
    pub position: u64,
    pub numeric: Tensor,
    pub categorical: Tensor,
    pub labels: Tensor,
    /// One keep-mask per hidden layer (empty without dropout).
    pub dropout: Vec<Tensor>,
}

#[derive(Debug)]
pub struct Loader {
    rx: Option<Receiver<Result<Batch>>>,
    thread: Option<JoinHandle<()>>,
    pub batches_per_epoch: u64,
    decoded: Arc<AtomicU64>,
}

impl Loader {
    pub fn start(
        shards: ShardSet,
        preprocess: Arc<Preprocess>,
        options: LoaderOptions,
    ) -> Result<Loader> {
        let total = shards.total_rows();
        let pieces = shard_pieces::pieces(&shards.rows, options.piece_rows);
        let batches_per_epoch = batches_per_epoch(&pieces, options.batch);
        if batches_per_epoch == 0 {
            let lanes = lane_count(options.batch);
            bail!(
                "the train split has {total} rows: cut into {lanes} lanes of its shards' rows, its \
                 shortest lane fills no global batch ({} rows, {} from each lane); lower \
                 manifest.config.global_batch",
                options.batch,
                options.batch / lanes
            );
        }
        if options.world == 0 || options.rank >= options.world {
            bail!(
                "rank {} of world size {}: no such rank",
                options.rank,
                options.world
            );
        }
        let (tx, rx) = batch_queue::queue(options.prefetch.max(1));
        let decoded = Arc::new(AtomicU64::new(0));
        let counter = Arc::clone(&decoded);
        let thread = std::thread::Builder::new()
            .name("runfn-loader".into())
            .spawn(move || {
                let lookup = Arc::new(preprocess.lookup());
                let mut producer = Producer {
                    shards,
                    pieces,
                    preprocess,
                    lookup,
                    options,
                    batches_per_epoch,
                    tx,
                    decoded: counter,
                };
                if let Err(e) = producer.run() {
                    let _ = producer.tx.send(Err(e));
                }
            })?;
        Ok(Loader {
            rx: Some(rx),
            thread: Some(thread),
            batches_per_epoch,
            decoded,
        })
    }

    /// Rows this rank has decoded from Parquet so far (cached rows are not decoded again).
    pub fn rows_decoded(&self) -> u64 {
        self.decoded.load(Ordering::Relaxed)
    }

    /// The next batch; blocks while the background threads prepare it.
    pub fn next_batch(&mut self) -> Result<Batch> {
        self.rx
            .as_ref()
            .and_then(|rx| rx.recv())
            .unwrap_or_else(|| Err(anyhow!("the input pipeline stopped unexpectedly")))
    }
}

impl Drop for Loader {
    fn drop(&mut self) {
        // Closing the queue makes the producer's next send fail, which ends it.
        drop(self.rx.take());
        if let Some(thread) = self.thread.take() {
            let _ = thread.join();
        }
    }
}

struct Producer {
    shards: ShardSet,
    pieces: Vec<Piece>,
    preprocess: Arc<Preprocess>,
    lookup: Arc<Lookup>,
    options: LoaderOptions,
    batches_per_epoch: u64,
    tx: Sender<Result<Batch>>,
    decoded: Arc<AtomicU64>,
}

/// A decode job: this rank's rows of one piece read (or taken from the cache), preprocessed, and
/// cut into one block per lane this rank reads, each in its epoch order, minus the rows a resume
/// skips.
type Job = JoinHandle<Result<Vec<FeatureBlock>>>;

/// This rank's decoded, preprocessed rows of each piece, kept in memory when they fit the cache
/// budget, so later epochs only permute rows instead of decoding Parquet again.
type Cache = Arc<Mutex<HashMap<usize, Arc<FeatureBlock>>>>;

/// The lanes a rank reads and where its slice starts in their rows of a batch.
#[derive(Debug, Clone)]
struct MyLanes {
    count: usize,
    per_batch: usize,
    mine: Range<usize>,
    /// Rows of the first lane of `mine` before this rank's slice starts (0 when `W` divides `L`).
    offset: usize,
}

impl MyLanes {
    /// This rank's contiguous rows of a piece of `rows` rows: its lanes' rows.
    fn rows_of(&self, rows: u64) -> Range<u64> {
        lane_rows(rows, self.mine.start, self.count).start
            ..lane_rows(rows, self.mine.end - 1, self.count).end
    }
}

impl Producer {
    /// The pieces to decode, in stream order, from the start position on, with the rows each of
    /// this rank's lanes skips in them. (With no shard cut, the pieces are the shards, and the
    /// order is the one shards had before they were cut into pieces.)
    fn plan(&self, epoch: u64, position: u64) -> Vec<Planned> {
        let lanes = self.lanes();
        let order = seeds::permutation(
            self.pieces.len(),
            &mut seeds::rng(self.options.seed, "shard-order", &[epoch]),
        );
        let mut skip: Vec<u64> = vec![position * lanes.per_batch as u64; lanes.mine.len()];
        let mut plan = Vec::new();
        for &s in &order {
            let rows = self.pieces[s as usize].len();
            let mut skips = Vec::with_capacity(skip.len());
            let mut whole = true;
            for (left, lane) in skip.iter_mut().zip(lanes.mine.clone()) {
                let range = lane_rows(rows, lane, lanes.count);
                let len = range.end - range.start;
                let skipped = (*left).min(len);
                *left -= skipped;
                whole &= skipped == len;
                skips.push(skipped as usize);
            }
            if !whole {
                plan.push(Planned {
                    epoch,
                    piece: s as usize,
                    skips,
                });
            }
        }
        plan
    }

    /// This rank's rows of every global batch: `lo..hi` within it.
    fn slice(&self) -> (usize, usize) {
        let (batch, rank, world) = (self.options.batch, self.options.rank, self.options.world);
        (rank * batch / world, (rank + 1) * batch / world)
    }

    /// The lanes that hold this rank's slice of every batch.
    fn lanes(&self) -> MyLanes {
        let count = lane_count(self.options.batch);
        let per_batch = self.options.batch / count;
        let (lo, hi) = self.slice();
        let first = lo / per_batch;
        let end = hi.div_ceil(per_batch).max(first + 1);
        MyLanes {
            count,
            per_batch,
            mine: first..end,
            offset: lo - first * per_batch,
        }
    }

    /// Sends batches until the consumer goes away. Decoding runs `lookahead` shards ahead,
    /// across epoch boundaries, so a new epoch does not start with a wait.
    fn run(&mut self) -> Result<()> {
        let (n_num, n_cat) = (
            self.preprocess.numeric_inputs(),
            self.preprocess.categorical.len(),
        );
        let (mut epoch, mut position) = (self.options.start_epoch, self.options.start_position);
        let mut planned_epoch = epoch;
        let mut plan: VecDeque<Planned> = self.plan(epoch, position).into();
        let mut jobs: VecDeque<(u64, Job)> = VecDeque::new();
        let (lo, hi) = self.slice();
        let lanes = self.lanes();
        let fresh_queues =
            || -> Vec<RowQueue> { (0..lanes.mine.len()).map(|_| RowQueue::default()).collect() };
        let mut queues = fresh_queues();
        let cache = self.cache_if_it_fits();
        loop {
            while jobs.len() < self.options.lookahead.max(1) {
                if plan.is_empty() {
                    planned_epoch += 1;
                    plan = self.plan(planned_epoch, 0).into();
                }
                let next = plan.pop_front().expect("an epoch has shards");
                // The job the producer waits on next gets the whole machine (at the start
                // nothing trains yet); a shard decoded ahead only takes the time the producer
                // and the training thread leave.
                let urgency = match jobs.is_empty() {
                    true => Urgency::Now,
                    false => Urgency::Ahead,
                };
                jobs.push_back((next.epoch, self.decode(next, cache.clone(), urgency)));
            }
            // One queue per lane this rank reads, each holding only that lane's rows.
            if queues.iter().any(|q| q.rows < lanes.per_batch) {
                let (e, job) = jobs.pop_front().expect("jobs were queued");
                let blocks = job
                    .join()
                    .map_err(|_| anyhow!("a shard decoding thread panicked"))??;
                if e == epoch {
                    for (queue, block) in queues.iter_mut().zip(blocks) {
                        queue.push(block);
                    }
                }
                continue;
            }
            // The lanes' rows of this batch, in lane order, copied once into one block, then
            // cut to this rank's slice (all of it for one process: no second copy).
            let lane_rows = lanes.per_batch * queues.len();
            let mut mine = FeatureBlock {
                rows: 0,
                numeric: Vec::with_capacity(lane_rows * n_num),
                categorical: Vec::with_capacity(lane_rows * n_cat),
                labels: Vec::with_capacity(lane_rows),
            };
            for queue in &mut queues {
                queue.take_into(&mut mine, lanes.per_batch, n_num, n_cat);
            }
            let part = if lanes.offset == 0 && hi - lo == mine.rows {
                mine
            } else {
                let mut cut = RowQueue::default();
                cut.push(mine);
                if lanes.offset > 0 {
                    cut.take(lanes.offset, n_num, n_cat);
                }
                cut.take(hi - lo, n_num, n_cat)
            };
            let masks = self.dropout_masks(epoch, position, lo..hi);
            if self
                .tx
                .send(Ok(self.batch(epoch, position, part, masks)))
                .is_err()
            {
                return Ok(());
            }
            position += 1;
            if position == self.batches_per_epoch {
                // The short tail of the epoch is dropped; later jobs of this epoch (if any)
                // are skipped when they come up.
                epoch += 1;
                position = 0;
                queues = fresh_queues();
            }
        }
    }

    /// A cache when this rank's rows (not the whole split's) fit the budget.
    fn cache_if_it_fits(&self) -> Option<Cache> {
        let per_row =
            4 * self.preprocess.numeric_inputs() + 8 * self.preprocess.categorical.len() + 4;
        let lanes = self.lanes();
        let rows: u64 = self
            .pieces
            .iter()
            .map(|p| {
                let r = lanes.rows_of(p.len());
                r.end - r.start
            })
            .sum();
        let bytes = rows as usize * per_row;
        (bytes <= self.options.cache_bytes).then(|| Arc::new(Mutex::new(HashMap::new())))
    }

    /// The dropout keep-masks of batch (epoch, position), from a stream of that position: a
    /// rank's masks are exactly the rows of them a single process would have drawn.
    fn dropout_masks(
        &self,
        epoch: u64,
        position: u64,
        rows: std::ops::Range<usize>,
    ) -> Vec<Tensor> {
        let p = self.options.dropout;
        if p <= 0.0 {
            return Vec::new();
        }
        let scale = (1.0 / (1.0 - p)) as f32;
        // Drop when a uniform u32 falls below p * 2^32: one draw and one compare per unit.
        let threshold = (p * 4_294_967_296.0).min(u32::MAX as f64) as u32;
        let mut rng = seeds::rng(self.options.seed, "dropout", &[epoch, position]);
        // Layer after layer, row after row, one u32 word per unit: a rank seeks straight to its
        // rows' words (ChaCha is seekable) instead of drawing the whole global batch.
        let mut layer_start = 0u128;
        self.options
            .dropout_widths
            .iter()
            .map(|&width| {
                let width = width as usize;
                rng.set_word_pos(layer_start + (rows.start * width) as u128);
                layer_start += (self.options.batch * width) as u128;
                let mine: Vec<f32> = (0..rows.len() * width)
                    .map(|_| {
                        if rng.random::<u32>() < threshold {
                            0.0
                        } else {
                            scale
                        }
                    })
                    .collect();
                let mask = Tensor::from_slice(&mine).reshape([rows.len() as i64, width as i64]);
                match self.options.pin_for {
                    Some(device @ Device::Cuda(_)) => mask.pin_memory(device),
                    _ => mask,
                }
            })
            .collect()
    }

    fn batch(&self, epoch: u64, position: u64, part: FeatureBlock, dropout: Vec<Tensor>) -> Batch {
        let (n_num, n_cat) = (
            self.preprocess.numeric_inputs() as i64,
            self.preprocess.categorical.len() as i64,
        );
        let rows = part.rows as i64;
        let pin = |t: Tensor| match self.options.pin_for {
            Some(device @ Device::Cuda(_)) => t.pin_memory(device),
            _ => t,
        };
        let numeric = if n_num == 0 {
            Tensor::zeros([rows, 0], (tch::Kind::Float, Device::Cpu))
        } else {
            Tensor::from_slice(&part.numeric).reshape([rows, n_num])
        };
        let categorical = if n_cat == 0 {
            Tensor::zeros([rows, 0], (tch::Kind::Int64, Device::Cpu))
        } else {
            Tensor::from_slice(&part.categorical).reshape([rows, n_cat])
        };
        Batch {
            epoch,
            position,
            numeric: pin(numeric),
            categorical: pin(categorical),
            labels: pin(Tensor::from_slice(&part.labels)),
            dropout,
        }
    }

    /// Decodes (or takes from the cache) this rank's rows of one piece and cuts them into its
    /// lanes, each in epoch order: a rank reads, decodes and copies only its own rows.
    fn decode(&self, planned: Planned, cache: Option<Cache>, urgency: Urgency) -> Job {
        let Planned {
            epoch,
            piece,
            skips,
        } = planned;
        let Piece { shard, rows: at } = self.pieces[piece].clone();
        let path = self.shards.paths[shard].clone();
        let shard_rows = self.shards.rows[shard];
        let rows = at.end - at.start;
        let preprocess = Arc::clone(&self.preprocess);
        let lookup = Arc::clone(&self.lookup);
        let seed = self.options.seed;
        let lanes = self.lanes();
        let decoded = Arc::clone(&self.decoded);
        std::thread::spawn(move || {
            if urgency == Urgency::Ahead {
                yield_to_training();
            }
            // This rank's rows of the piece, counted from the piece's start and in the shard.
            let range = lanes.rows_of(rows);
            let in_shard = at.start + range.start..at.start + range.end;
            let cached = cache
                .as_ref()
                .and_then(|c| c.lock().ok()?.get(&piece).cloned());
            let block = match cached {
                Some(block) => block,
                None => {
                    let parts = match urgency {
                        Urgency::Now => available_cores(),
                        Urgency::Ahead => 1,
                    };
                    let block = decode_rows(&path, &preprocess, &lookup, in_shard.clone(), parts)?;
                    if block.rows as u64 != in_shard.end - in_shard.start {
                        bail!(
                            "{}: read {} rows of rows {}..{}, the index says the shard has \
                             {shard_rows}",
                            path.display(),
                            block.rows,
                            in_shard.start + 1,
                            in_shard.end
                        );
                    }
                    decoded.fetch_add(block.rows as u64, Ordering::Relaxed);
                    let block = Arc::new(block);
                    if let Some(cache) = &cache
                        && let Ok(mut map) = cache.lock()
                    {
                        map.insert(piece, Arc::clone(&block));
                    }
                    block
                }
            };
            let (n_num, n_cat) = (preprocess.numeric_inputs(), preprocess.categorical.len());
            let cut = |(lane, skip): (usize, usize)| {
                let lane_range = lane_rows(rows, lane, lanes.count);
                let first = (lane_range.start - range.start) as u32;
                let len = (lane_range.end - lane_range.start) as usize;
                let mut order = seeds::permutation(
                    len,
                    &mut seeds::rng(seed, "row-order", &[epoch, piece as u64, lane as u64]),
                );
                order.drain(..skip.min(order.len()));
                order.iter_mut().for_each(|i| *i += first);
                block.gather(&order, n_num, n_cat)
            };
            let work: Vec<(usize, usize)> = lanes.mine.clone().zip(skips).collect();
            let threads = match urgency {
                Urgency::Now => available_cores().min(work.len()).max(1),
                Urgency::Ahead => 1,
            };
            // The lanes in `threads` runs of consecutive lanes, gathered side by side when the
            // producer waits for them, and put back in lane order.
            let per = work.len().div_ceil(threads).max(1);
            let runs: Vec<Vec<FeatureBlock>> = std::thread::scope(|scope| {
                let handles: Vec<_> = work
                    .chunks(per)
                    .map(|run| scope.spawn(|| run.iter().copied().map(&cut).collect::<Vec<_>>()))
                    .collect();
                handles
                    .into_iter()
                    .map(|h| h.join().unwrap_or_default())
                    .collect()
            });
            let blocks: Vec<FeatureBlock> = runs.into_iter().flatten().collect();
            if blocks.len() != work.len() {
                bail!("{}: a lane-cutting thread panicked", path.display());
            }
            Ok(blocks)
        })
    }
}

/// Whether the producer waits for a decoding job now or only later.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Urgency {
    Now,
    Ahead,
}

/// Rows `range` of a shard, decoded and preprocessed, in `parts` row ranges on as many threads
/// (appended in row order, so the block is the same whatever the number of parts).
fn decode_rows(
    path: &std::path::Path,
    preprocess: &Preprocess,
    lookup: &Lookup,
    range: Range<u64>,
    parts: usize,
) -> Result<FeatureBlock> {
    let columns = preprocess.columns();
    let decode = |range: Range<u64>| -> Result<FeatureBlock> {
        let mut reader = ShardReader::open_rows(path, &columns, range)?;
        let mut block = FeatureBlock::default();
        while let Some((batch, first_row)) = reader.next_batch()? {
            block.append(&preprocess.apply(lookup, &batch, path, first_row)?);
        }
        Ok(block)
    };
    let len = range.end - range.start;
    let parts = (parts as u64).clamp(1, len.div_ceil(MIN_PART_ROWS).max(1));
    if parts == 1 {
        return decode(range);
    }
    let cuts: Vec<Range<u64>> = (0..parts)
        .map(|i| range.start + len * i / parts..range.start + len * (i + 1) / parts)
        .collect();
    let blocks = std::thread::scope(|scope| {
        let handles: Vec<_> = cuts
            .into_iter()
            .map(|cut| scope.spawn(move || decode(cut)))
            .collect();
        handles
            .into_iter()
            .map(|h| {
                h.join()
                    .unwrap_or_else(|_| bail!("a shard decoding thread panicked"))
            })
            .collect::<Result<Vec<_>>>()
    })?;
    let mut whole = FeatureBlock::default();
    for block in &blocks {
        whole.append(block);
    }
    Ok(whole)
}

/// Below this many rows a part of a piece is not worth a thread of its own.
const MIN_PART_ROWS: u64 = 65_536;

fn available_cores() -> usize {
    std::thread::available_parallelism().map_or(1, |n| n.get())
}

/// Puts the calling thread in the idle scheduling class (`SCHED_IDLE`), so that a shard decoded
/// ahead runs only on time no other thread wants: decoding the next shard on the producer's core
/// was a fifth of every step's time while it ran (steps 20-140 of a run on millions of rows,
/// one libtorch thread on two cores). At nice 10 it still took the producer's core for a
/// scheduler slice now and then, and at one libtorch thread the producer was late by about
/// 5% of the steps; an idle-class thread gives way as soon as the producer wakes. Only the
/// timing changes, never the rows. Where the class is refused, nice 10; a failure of both (a
/// sandbox that forbids them) is harmless.
fn yield_to_training() {
    #[cfg(target_os = "linux")]
    // SAFETY: plain system calls on the calling thread's own id.
    unsafe {
        let param = libc::sched_param { sched_priority: 0 };
        if libc::sched_setscheduler(0, libc::SCHED_IDLE, &param) != 0 {
            let tid = libc::gettid();
            libc::setpriority(libc::PRIO_PROCESS, tid as libc::id_t, 10);
        }
    }
}

/// One piece of an epoch's stream: which, and how many of its (permuted) rows in each of this
/// rank's lanes a resume skips.
#[derive(Debug, Clone)]
struct Planned {
    epoch: u64,
    piece: usize,
    skips: Vec<usize>,
}

/// Decoded rows waiting to be cut into batches, without copying the remainder on every cut.
#[derive(Default)]
struct RowQueue {
    blocks: VecDeque<FeatureBlock>,
    /// Rows of the front block already taken.
    offset: usize,
    rows: usize,
}

impl RowQueue {
    fn push(&mut self, block: FeatureBlock) {
        self.rows += block.rows;
        self.blocks.push_back(block);
    }

    /// Removes the next `count` rows and returns them.
    fn take(&mut self, count: usize, n_num: usize, n_cat: usize) -> FeatureBlock {
        let mut out = FeatureBlock::default();
        self.take_into(&mut out, count, n_num, n_cat);
        out
    }

    /// Removes the next `count` rows and appends them to `out`.
    fn take_into(&mut self, out: &mut FeatureBlock, count: usize, n_num: usize, n_cat: usize) {
        let wanted = out.rows + count;
        while out.rows < wanted {
            let front = self.blocks.front().expect("enough rows queued");
            let n = (front.rows - self.offset).min(wanted - out.rows);
            let (a, b) = (self.offset, self.offset + n);
            out.numeric
                .extend_from_slice(&front.numeric[a * n_num..b * n_num]);
            out.categorical
                .extend_from_slice(&front.categorical[a * n_cat..b * n_cat]);
            out.labels.extend_from_slice(&front.labels[a..b]);
            out.rows += n;
            self.offset += n;
            if self.offset == front.rows {
                self.blocks.pop_front();
                self.offset = 0;
            }
        }
        self.rows -= count;
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn block(start: usize, rows: usize) -> FeatureBlock {
        FeatureBlock {
            rows,
            numeric: (start..start + rows).map(|i| i as f32).collect(),
            categorical: (start..start + rows).map(|i| i as i64).collect(),
            labels: vec![0.0; rows],
        }
    }

    #[test]
    fn row_queue_cuts_across_blocks() {
        let mut q = RowQueue::default();
        q.push(block(0, 5));
        q.push(block(5, 7));
        let first = q.take(4, 1, 1);
        assert_eq!(first.numeric, vec![0.0, 1.0, 2.0, 3.0]);
        let second = q.take(6, 1, 1);
        assert_eq!(second.categorical, vec![4, 5, 6, 7, 8, 9]);
        assert_eq!(second.labels.len(), 6);
        let third = q.take(2, 1, 1);
        assert_eq!(third.numeric, vec![10.0, 11.0]);
        assert_eq!(q.rows, 0);
    }
}

#[cfg(test)]
mod resume_tests {
    use std::sync::Arc;

    use arrow::array::{Float64Array, Int64Array, RecordBatch, StringArray};
    use arrow::datatypes::{DataType, Field, Schema};
    use parquet::arrow::ArrowWriter;

    use super::*;
    use crate::features::{CategoricalFeature, NumericFeature, Preprocess};

    fn write_shards(dir: &std::path::Path, sizes: &[usize]) -> ShardSet {
        let schema = Arc::new(Schema::new(vec![
            Field::new("x", DataType::Float64, true),
            Field::new("c", DataType::Utf8, true),
            Field::new("y", DataType::Int64, true),
        ]));
        let mut paths = Vec::new();
        let mut next = 0;
        for (i, &n) in sizes.iter().enumerate() {
            let path = dir.join(format!("part-{i}.parquet"));
            let x: Vec<f64> = (next..next + n).map(|v| v as f64).collect();
            let c: Vec<&str> = (0..n).map(|v| ["a", "b"][v % 2]).collect();
            let y: Vec<i64> = (0..n as i64).map(|v| v % 2).collect();
            next += n;
            let batch = RecordBatch::try_new(
                schema.clone(),
                vec![
                    Arc::new(Float64Array::from(x)),
                    Arc::new(StringArray::from(c)),
                    Arc::new(Int64Array::from(y)),
                ],
            )
            .unwrap();
            let mut writer =
                ArrowWriter::try_new(std::fs::File::create(&path).unwrap(), schema.clone(), None)
                    .unwrap();
            writer.write(&batch).unwrap();
            writer.close().unwrap();
            paths.push(path);
        }
        ShardSet {
            paths,
            rows: sizes.iter().map(|&n| n as u64).collect(),
        }
    }

    fn preprocess() -> Arc<Preprocess> {
        Arc::new(Preprocess {
            label: "y".into(),
            label_positive: None,
            numeric: vec![NumericFeature {
                name: "x".into(),
                mean: 0.0,
                std: 1.0,
                nulls: 0,
                indicator: false,
                boolean: false,
            }],
            categorical: vec![CategoricalFeature {
                name: "c".into(),
                vocab: vec!["a".into(), "b".into()],
            }],
            train_rows: 0,
        })
    }

    /// Options of the tests' loaders: prefetch and lookahead 2, no pinning, seed 3.
    fn options(
        batch: usize,
        rank: usize,
        world: usize,
        position: u64,
        cache: usize,
    ) -> LoaderOptions {
        LoaderOptions {
            batch,
            piece_rows: 1 << 17,
            seed: 3,
            start_epoch: 0,
            start_position: position,
            rank,
            world,
            prefetch: 2,
            lookahead: 2,
            pin_for: None,
            cache_bytes: cache,
            dropout: 0.0,
            dropout_widths: vec![],
        }
    }

    /// `count` batches of 7 rows from (epoch, position) on, shards read in pieces of at most
    /// `piece_rows` rows.
    fn batches(
        set: &ShardSet,
        piece_rows: u64,
        (epoch, position): (u64, u64),
        count: usize,
        cache: usize,
    ) -> Vec<(u64, u64, Vec<f32>)> {
        let mut loader = Loader::start(
            set.clone(),
            preprocess(),
            LoaderOptions {
                start_epoch: epoch,
                piece_rows,
                ..options(7, 0, 1, position, cache)
            },
        )
        .unwrap();
        (0..count)
            .map(|_| {
                let b = loader.next_batch().unwrap();
                let x: Vec<f32> = Vec::try_from(&b.numeric.reshape([-1])).unwrap();
                (b.epoch, b.position, x)
            })
            .collect()
    }

    #[test]
    fn a_shard_decoded_in_parts_is_the_block_decoded_whole() {
        let dir = tempfile::tempdir().unwrap();
        let shards = write_shards(dir.path(), &[200_003]);
        let preprocess = preprocess();
        let lookup = preprocess.lookup();
        let path = &shards.paths[0];
        for range in [0..200_003, 1_000..190_001, 5..70_000] {
            let whole = decode_rows(path, &preprocess, &lookup, range.clone(), 1).unwrap();
            assert_eq!(whole.rows as u64, range.end - range.start);
            for parts in [2, 3, 7] {
                let cut = decode_rows(path, &preprocess, &lookup, range.clone(), parts).unwrap();
                assert!(cut == whole, "{range:?} in {parts} parts");
            }
        }
    }

    #[test]
    fn resuming_mid_epoch_replays_the_same_batches_with_or_without_the_cache() {
        let dir = tempfile::tempdir().unwrap();
        let set = write_shards(dir.path(), &[10, 13, 9]);
        // 32 rows, batch 7, so 7 lanes of 3 to 6 rows: 3 batches per epoch (the shortest
        // lane's), 11 rows dropped. Shards are whole pieces here.
        let whole = 1 << 17;
        let straight = batches(&set, whole, (0, 0), 13, 0);
        assert_eq!(straight[3].0, 1, "epoch 1 starts after 3 batches");
        assert_eq!(straight[3].1, 0);
        let resumed = batches(&set, whole, (0, 2), 11, 0);
        assert_eq!(resumed, straight[2..].to_vec());
        let resumed = batches(&set, whole, (1, 1), 9, 0);
        assert_eq!(resumed, straight[4..].to_vec());
        let cached = batches(&set, whole, (0, 0), 13, 1 << 20);
        assert_eq!(cached, straight);
        // Every row appears at most once per epoch and the epochs differ in order.
        let mut epoch0: Vec<f32> = straight[..3].iter().flat_map(|b| b.2.clone()).collect();
        epoch0.sort_by(f32::total_cmp);
        epoch0.dedup();
        assert_eq!(epoch0.len(), 21);
        assert_ne!(straight[0].2, straight[3].2);
    }

    #[test]
    fn shards_read_in_pieces_resume_exactly_and_shuffle_across_pieces() {
        let dir = tempfile::tempdir().unwrap();
        // 700 rows in shards of 300, 250 and 150, read in pieces of at most 60 rows: 13 pieces
        // (5 of 60 rows, 8 of 50), each cut into 7 lanes of 7-9 rows; batches of 7 rows, one
        // from each lane.
        let set = write_shards(dir.path(), &[300, 250, 150]);
        let per_epoch = batches_per_epoch(&shard_pieces::pieces(&set.rows, 60), 7);
        // The shortest lanes hold 8 rows of each 60-row piece and 7 of each 50-row one.
        assert_eq!(per_epoch, 5 * 8 + 8 * 7);
        let straight = batches(&set, 60, (0, 0), 220, 0);
        assert_eq!((straight[96].0, straight[96].1), (1, 0));
        for start in [(0, 1), (0, 40), (1, 95), (2, 5)] {
            let from = (start.0 * per_epoch + start.1) as usize;
            let resumed = batches(&set, 60, start, 220 - from, 0);
            assert_eq!(resumed, straight[from..].to_vec(), "resumed at {start:?}");
        }
        assert_eq!(batches(&set, 60, (0, 0), 220, 1 << 20), straight);
        let mut epoch0: Vec<f32> = straight[..96].iter().flat_map(|b| b.2.clone()).collect();
        epoch0.sort_by(f32::total_cmp);
        epoch0.dedup();
        assert_eq!(epoch0.len(), 96 * 7, "every row at most once an epoch");
        // Lane 0 (each batch's first row) goes through all 13 pieces, in a permuted order
        // that mixes the shards.
        let pieces = shard_pieces::pieces(&set.rows, 60);
        let piece_of = |x: f32| {
            pieces
                .iter()
                .position(|p| {
                    let start: u64 = set.rows[..p.shard].iter().sum();
                    (start + p.rows.start..start + p.rows.end).contains(&(x as u64))
                })
                .unwrap()
        };
        let lane0: Vec<usize> = straight[..96].iter().map(|b| piece_of(b.2[0])).collect();
        // Each piece has its own row order: lane 0's offsets within the 5 equal pieces of
        // shard 0 are all different sequences.
        let offsets = |piece: usize| -> Vec<u64> {
            let start = pieces[piece].rows.start;
            straight[..96]
                .iter()
                .zip(&lane0)
                .filter(|&(_, &p)| p == piece)
                .map(|(b, _)| b.2[0] as u64 - start)
                .collect()
        };
        let mut orders: Vec<Vec<u64>> = (0..5).map(offsets).collect();
        assert!(orders.iter().all(|o| o.len() == 8));
        orders.sort();
        orders.dedup();
        assert_eq!(orders.len(), 5, "pieces of one shard share a row order");
        let mut seen = lane0.clone();
        seen.dedup();
        assert_eq!(seen.len(), 13, "{seen:?}");
        let mut sorted = seen.clone();
        sorted.sort_unstable();
        assert_eq!(sorted, (0..13).collect::<Vec<_>>());
        assert_ne!(seen, sorted);
        // Reading in pieces changes the order from reading shards whole.
        assert_ne!(batches(&set, 1 << 17, (0, 0), 5, 0), straight[..5].to_vec());
    }

    #[test]
    fn ranks_split_each_batch_and_its_dropout_masks_without_overlap() {
        let dir = tempfile::tempdir().unwrap();
        // 20 + 13 + 20 rows in batches of 8 (8 lanes of 5 to 8 rows): batches cross shards, and
        // the lanes' tails are dropped.
        let set = write_shards(dir.path(), &[20, 13, 20]);
        // (rows, per-layer masks) of `count` batches from `position` on, as `rank` of `world`.
        let part = |rank, world, position, count| {
            let mut loader = Loader::start(
                set.clone(),
                preprocess(),
                LoaderOptions {
                    dropout: 0.5,
                    dropout_widths: vec![3, 2],
                    ..options(8, rank, world, position, 1 << 20)
                },
            )
            .unwrap();
            (0..count)
                .map(|_| {
                    let b = loader.next_batch().unwrap();
                    let numeric = Vec::<f32>::try_from(&b.numeric.reshape([-1])).unwrap();
                    let masks: Vec<Vec<f32>> = b
                        .dropout
                        .iter()
                        .map(|m| Vec::<f32>::try_from(&m.reshape([-1])).unwrap())
                        .collect();
                    (b.epoch, b.position, numeric, masks)
                })
                .collect::<Vec<_>>()
        };
        // Three epochs of 5 batches and more, and a resume at batch 4 of the first.
        let one = part(0, 1, 0, 18);
        for (start, count) in [(0, 18), (4, 14)] {
            let ranks: Vec<_> = (0..4).map(|r| part(r, 4, start, count)).collect();
            for (i, whole) in one[start as usize..].iter().enumerate() {
                assert_eq!((ranks[0][i].0, ranks[0][i].1), (whole.0, whole.1));
                let rows: Vec<f32> = ranks.iter().flat_map(|r| r[i].2.clone()).collect();
                assert_eq!(rows, whole.2, "batch {i} from {start}");
                for layer in 0..2 {
                    let masks: Vec<f32> =
                        ranks.iter().flat_map(|r| r[i].3[layer].clone()).collect();
                    assert_eq!(masks, whole.3[layer]);
                }
            }
        }
        assert_eq!((one[4].0, one[5].0), (0, 1), "5 batches an epoch");
        // With 3 ranks (3 does not divide 8 lanes) each reads the lanes its slice touches.
        let ranks: Vec<_> = (0..3).map(|r| part(r, 3, 0, 12)).collect();
        for (i, whole) in one[..12].iter().enumerate() {
            let rows: Vec<f32> = ranks.iter().flat_map(|r| r[i].2.clone()).collect();
            assert_eq!(rows, whole.2, "batch {i} with 3 ranks");
        }
        // 8 lanes, so each of 4 ranks reads two lanes: about a quarter of the 53 rows, decoded
        // once (the rest of the epochs come from its cache), where one process decodes all.
        let decoded = |rank, world, cache| {
            let mut loader = Loader::start(
                set.clone(),
                preprocess(),
                LoaderOptions {
                    prefetch: 1,
                    lookahead: 1,
                    ..options(8, rank, world, 0, cache)
                },
            )
            .unwrap();
            for _ in 0..18 {
                loader.next_batch().unwrap();
            }
            let rows = loader.rows_decoded();
            drop(loader);
            rows
        };
        assert_eq!(decoded(0, 1, 1 << 20), 53);
        let shares: Vec<u64> = (0..4).map(|r| decoded(r, 4, 1 << 20)).collect();
        assert_eq!(shares.iter().sum::<u64>(), 53, "{shares:?}");
        assert!(shares.iter().all(|&n| (12..=15).contains(&n)), "{shares:?}");
        // Without a cache every epoch decodes again, still only the rank's rows.
        assert!(decoded(1, 4, 0) * 3 < decoded(0, 1, 0));
        assert!(one[0].3[0].contains(&0.0) && one[0].3[0].contains(&2.0));
    }
}
