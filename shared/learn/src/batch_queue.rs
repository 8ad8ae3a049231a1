//! The bounded queue between the batch producer and the training loop, refilled in bursts.
//!
//! With a plain bounded channel a full queue parks the producer on every slot: each batch the
//! loop takes wakes the producer to make exactly one more, and the wake (a futex call, on a
//! virtual machine an interrupt to the other core) is paid inside the loop's receive, tens of
//! microseconds a step: about 5% of a 1 ms step with one libtorch thread on two cores. Here a
//! producer that finds the queue full sleeps until the loop has taken half of it, then refills
//! it: one wake per `capacity / 2` batches. Either side is woken only when it sleeps.

use std::collections::VecDeque;
use std::sync::{Arc, Condvar, Mutex, MutexGuard};

/// A queue of at most `capacity` items (at least 1): its two ends.
pub fn queue<T>(capacity: usize) -> (Sender<T>, Receiver<T>) {
    let capacity = capacity.max(1);
    let shared = Arc::new(Shared {
        state: Mutex::new(State {
            items: VecDeque::with_capacity(capacity),
            producer_waiting: false,
            consumer_waiting: false,
            sender_alive: true,
            receiver_alive: true,
        }),
        space: Condvar::new(),
        items: Condvar::new(),
        capacity,
        refill_at: capacity / 2,
    });
    (
        Sender {
            shared: Arc::clone(&shared),
        },
        Receiver { shared },
    )
}

struct Shared<T> {
    state: Mutex<State<T>>,
    /// The producer waits on this for room.
    space: Condvar,
    /// The loop waits on this for an item.
    items: Condvar,
    capacity: usize,
    /// A producer that found the queue full is woken once it holds this many items.
    refill_at: usize,
}

struct State<T> {
    items: VecDeque<T>,
    producer_waiting: bool,
    consumer_waiting: bool,
    sender_alive: bool,
    receiver_alive: bool,
}

impl<T> Shared<T> {
    /// The state, even if a thread panicked holding it (the flags stay meaningful).
    fn lock(&self) -> MutexGuard<'_, State<T>> {
        self.state.lock().unwrap_or_else(|e| e.into_inner())
    }
}

pub struct Sender<T> {
    shared: Arc<Shared<T>>,
}

impl<T> Sender<T> {
    /// Queues `item`; when the queue is full, first waits until it is down to half. `Err` gives
    /// the item back when the receiver is gone.
    pub fn send(&self, item: T) -> Result<(), T> {
        let shared = &*self.shared;
        let mut state = shared.lock();
        if state.receiver_alive && state.items.len() >= shared.capacity {
            state.producer_waiting = true;
            while state.receiver_alive && state.items.len() > shared.refill_at {
                state = shared.space.wait(state).unwrap_or_else(|e| e.into_inner());
            }
            state.producer_waiting = false;
        }
        if !state.receiver_alive {
            return Err(item);
        }
        state.items.push_back(item);
        if state.consumer_waiting {
            shared.items.notify_one();
        }
        Ok(())
    }
}

impl<T> Drop for Sender<T> {
    fn drop(&mut self) {
        let mut state = self.shared.lock();
        state.sender_alive = false;
        self.shared.items.notify_all();
    }
}

pub struct Receiver<T> {
    shared: Arc<Shared<T>>,
}

impl<T> Receiver<T> {
    /// The next item; waits while the queue is empty. `None` once the sender is gone and every
    /// item it sent has been taken.
    pub fn recv(&self) -> Option<T> {
        let shared = &*self.shared;
        let mut state = shared.lock();
        loop {
            if let Some(item) = state.items.pop_front() {
                if state.producer_waiting && state.items.len() <= shared.refill_at {
                    shared.space.notify_one();
                }
                return Some(item);
            }
            if !state.sender_alive {
                return None;
            }
            state.consumer_waiting = true;
            state = shared.items.wait(state).unwrap_or_else(|e| e.into_inner());
            state.consumer_waiting = false;
        }
    }
}

impl<T> Drop for Receiver<T> {
    fn drop(&mut self) {
        let mut state = self.shared.lock();
        state.receiver_alive = false;
        self.shared.space.notify_all();
    }
}

impl<T> std::fmt::Debug for Receiver<T> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Receiver")
            .field("capacity", &self.shared.capacity)
            .finish_non_exhaustive()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::time::Duration;

    #[test]
    fn items_arrive_in_order_and_the_end_is_seen_after_the_last() {
        for capacity in [1, 2, 3, 8] {
            let (tx, rx) = queue(capacity);
            let producer = std::thread::spawn(move || {
                for i in 0..1000 {
                    tx.send(i).unwrap();
                }
            });
            let got: Vec<i32> = std::iter::from_fn(|| rx.recv()).collect();
            producer.join().unwrap();
            assert_eq!(got, (0..1000).collect::<Vec<_>>(), "capacity {capacity}");
        }
    }

    #[test]
    fn a_full_queue_takes_no_more_until_half_of_it_is_taken() {
        let (tx, rx) = queue(8);
        for i in 0..8 {
            tx.send(i).unwrap();
        }
        let sent = Arc::new(Mutex::new(8));
        let counter = Arc::clone(&sent);
        let producer = std::thread::spawn(move || {
            for i in 8..12 {
                tx.send(i).unwrap();
                *counter.lock().unwrap() += 1;
            }
        });
        let settle = || std::thread::sleep(Duration::from_millis(50));
        settle();
        assert_eq!(*sent.lock().unwrap(), 8);
        for expected in 0..3 {
            assert_eq!(rx.recv(), Some(expected));
            settle();
            assert_eq!(
                *sent.lock().unwrap(),
                8,
                "woken with {} queued",
                7 - expected
            );
        }
        // Down to 4 of 8: the producer refills.
        assert_eq!(rx.recv(), Some(3));
        producer.join().unwrap();
        assert_eq!(*sent.lock().unwrap(), 12);
        let rest: Vec<i32> = std::iter::from_fn(|| rx.recv()).collect();
        assert_eq!(rest, (4..12).collect::<Vec<_>>());
    }

    #[test]
    fn a_sender_blocked_on_a_full_queue_is_released_when_the_receiver_goes() {
        let (tx, rx) = queue(2);
        tx.send(1).unwrap();
        tx.send(2).unwrap();
        let producer = std::thread::spawn(move || tx.send(3));
        std::thread::sleep(Duration::from_millis(20));
        drop(rx);
        assert_eq!(producer.join().unwrap(), Err(3));
    }
}
