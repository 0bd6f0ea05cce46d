//! An answer's bytes on their way to the client, held where the answer budget can drop them.
//!
//! hyper holds what a body gives it until the client takes it. A `Full` body gives everything
//! at once, so an answer's bytes lived inside the connection, where only the connection's own
//! task could free them, and a task runs only after every task queued before it: under a burst
//! of large answers, connections cut to make room freed their memory hundreds of milliseconds
//! later. And an answer serialized into one `Vec` took one large allocation, grown by doubling
//! (copied at each step, and up to twice its size), which the allocator kept after it was freed.
//!
//! So an answer is serialized into chunks of `CHUNK` bytes (`pure_lang::Json`), and hyper is given
//! one chunk at a time: it asks for the next only when its write buffer (`max_buf_size`,
//! 64 KiB) has room, which is when the client has taken what came before. The rest of a large
//! answer stays in a `HeldAnswer`, shared with the connection's `Slot`, so that the thread that
//! cuts a connection frees its answer on the spot, and freed chunks are of one size, which the
//! allocator hands out again to the next answer.
//!
//! This relies on hyper copying each chunk into its own buffer (its "flatten" write strategy,
//! which it picks because `Wire` does not offer vectored writes): a chunk given to hyper is
//! dropped at once.

use std::collections::VecDeque;
use std::io;
use std::pin::Pin;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{Arc, Mutex, MutexGuard};
use std::task::{Context, Poll};

use hyper::body::{Body, Bytes, Frame, SizeHint};

/// The size of an answer's chunks (`pure_lang::Json` writes them): hyper is given one at a
/// time. An answer of one chunk is given whole and not counted against the budget (hyper's
/// write buffer holds as much anyway).
#[cfg(test)]
pub const CHUNK: usize = pure_lang::JSON_CHUNK;

/// A large answer's chunks that hyper has not taken yet, counted in the bytes held for clients
/// until hyper takes them, they are cut, or the connection ends.
///
/// Invariant: the shared count holds exactly the bytes of `rest` for this answer.
pub struct HeldAnswer {
    rest: Mutex<VecDeque<Bytes>>,
    /// Dropped to make room: the body ends in an error, and hyper drops the connection.
    cut: AtomicBool,
    held: Arc<AtomicU64>,
}

impl HeldAnswer {
    /// Holds `chunks` (`size` bytes in all), counting them in `held`.
    pub fn new(chunks: VecDeque<Bytes>, size: u64, held: Arc<AtomicU64>) -> Arc<HeldAnswer> {
        debug_assert_eq!(size, chunks.iter().map(|c| c.len() as u64).sum::<u64>());
        held.fetch_add(size, Ordering::Relaxed);
        Arc::new(HeldAnswer {
            rest: Mutex::new(chunks),
            cut: AtomicBool::new(false),
            held,
        })
    }

    fn rest(&self) -> MutexGuard<'_, VecDeque<Bytes>> {
        // Nothing panics while holding it.
        self.rest
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner)
    }

    /// Whether hyper has not taken all of it yet.
    pub fn is_held(&self) -> bool {
        !self.rest().is_empty()
    }

    /// Drops what hyper has not taken; the bytes freed.
    pub fn cut(&self) -> u64 {
        self.cut.store(true, Ordering::Relaxed);
        let dropped = std::mem::take(&mut *self.rest());
        self.release(&dropped)
    }

    fn release(&self, chunks: &VecDeque<Bytes>) -> u64 {
        let bytes = chunks.iter().map(|chunk| chunk.len() as u64).sum();
        self.held.fetch_sub(bytes, Ordering::Relaxed);
        bytes
    }

    /// The next chunk for hyper; `Ok(None)` once all of it was taken.
    fn next_chunk(&self) -> io::Result<Option<Bytes>> {
        let next = self.rest().pop_front();
        match next {
            Some(chunk) => {
                self.held.fetch_sub(chunk.len() as u64, Ordering::Relaxed);
                Ok(Some(chunk))
            }
            None if self.cut.load(Ordering::Relaxed) => Err(io::Error::new(
                io::ErrorKind::ConnectionAborted,
                "the client stopped reading, and its answer was dropped to make room",
            )),
            None => Ok(None),
        }
    }
}

impl Drop for HeldAnswer {
    fn drop(&mut self) {
        let rest = std::mem::take(self.rest.get_mut().unwrap_or_else(|p| p.into_inner()));
        self.release(&rest);
    }
}

/// The body of every answer pure-serve sends.
pub enum AnswerBody {
    /// Given to hyper whole: an answer of one chunk at most, or none.
    Whole(Option<Bytes>),
    /// A large answer as serialized, not yet counted against the budget (`Connections::answer`
    /// holds it for its connection).
    Chunks { chunks: VecDeque<Bytes>, size: u64 },
    /// A large answer counted in the bytes held for clients, which the budget may drop.
    Held { answer: Arc<HeldAnswer>, size: u64 },
    /// A live query's events, computed as hyper asks for them (`live`).
    Events(Box<crate::live::EventStream>),
}

impl AnswerBody {
    pub fn empty() -> AnswerBody {
        AnswerBody::Whole(None)
    }

    pub fn whole(bytes: impl Into<Bytes>) -> AnswerBody {
        AnswerBody::Whole(Some(bytes.into()))
    }

    /// A handler's answer, in its chunks (no copy).
    pub fn from_json(json: pure_lang::Json) -> AnswerBody {
        let size = json.len() as u64;
        let mut chunks: VecDeque<Bytes> = json.into_chunks().map(Bytes::from).collect();
        if chunks.len() <= 1 {
            return AnswerBody::Whole(chunks.pop_front());
        }
        AnswerBody::Chunks { chunks, size }
    }
}

impl Body for AnswerBody {
    type Data = Bytes;
    type Error = io::Error;

    fn poll_frame(
        self: Pin<&mut Self>,
        cx: &mut Context<'_>,
    ) -> Poll<Option<Result<Frame<Bytes>, io::Error>>> {
        let frame = match self.get_mut() {
            AnswerBody::Whole(bytes) => bytes.take().map(Ok),
            AnswerBody::Chunks { chunks, .. } => chunks.pop_front().map(Ok),
            AnswerBody::Held { answer, .. } => answer.next_chunk().transpose(),
            AnswerBody::Events(stream) => return stream.poll_frame(cx),
        };
        Poll::Ready(frame.map(|chunk| chunk.map(Frame::data)))
    }

    fn is_end_stream(&self) -> bool {
        match self {
            AnswerBody::Whole(bytes) => bytes.as_ref().is_none_or(Bytes::is_empty),
            AnswerBody::Chunks { chunks, .. } => chunks.is_empty(),
            AnswerBody::Held { .. } | AnswerBody::Events(_) => false,
        }
    }

    fn size_hint(&self) -> SizeHint {
        match self {
            AnswerBody::Whole(bytes) => {
                SizeHint::with_exact(bytes.as_ref().map_or(0, |b| b.len() as u64))
            }
            AnswerBody::Chunks { size, .. } | AnswerBody::Held { size, .. } => {
                SizeHint::with_exact(*size)
            }
            AnswerBody::Events(_) => SizeHint::default(),
        }
    }
}

#[cfg(test)]
mod tests {
    use std::io::Write as _;

    use super::*;

    fn frames(body: &mut AnswerBody) -> Vec<io::Result<Bytes>> {
        let waker = std::task::Waker::noop();
        let mut context = Context::from_waker(waker);
        let mut out = Vec::new();
        while let Poll::Ready(Some(frame)) = Pin::new(&mut *body).poll_frame(&mut context) {
            let failed = frame.is_err();
            out.push(frame.map(|f| f.into_data().expect("data")));
            if failed {
                break;
            }
        }
        out
    }

    fn written(pieces: &[&[u8]]) -> AnswerBody {
        let mut writer = pure_lang::Json::default();
        for piece in pieces {
            writer.write_all(piece).expect("never fails");
        }
        AnswerBody::from_json(writer)
    }

    fn held(size: usize, counter: &Arc<AtomicU64>) -> (Arc<HeldAnswer>, AnswerBody) {
        let bytes: Vec<u8> = (0..size).map(|i| i as u8).collect();
        let AnswerBody::Chunks { chunks, size } = written(&[&bytes]) else {
            panic!("{size} bytes are more than a chunk");
        };
        let answer = HeldAnswer::new(chunks, size, counter.clone());
        (answer.clone(), AnswerBody::Held { answer, size })
    }

    #[test]
    fn the_writer_cuts_chunks_at_the_chunk_size_whatever_the_writes() {
        let bytes: Vec<u8> = (0..CHUNK * 2 + 10).map(|i| (i % 251) as u8).collect();
        for piece in [1, 7, 1000, CHUNK - 1, CHUNK, CHUNK + 1, bytes.len()] {
            let pieces: Vec<&[u8]> = bytes.chunks(piece).collect();
            let mut body = written(&pieces);
            assert_eq!(body.size_hint().exact(), Some(bytes.len() as u64));
            let chunks: Vec<Bytes> = frames(&mut body).into_iter().map(Result::unwrap).collect();
            let sizes: Vec<usize> = chunks.iter().map(Bytes::len).collect();
            assert_eq!(sizes, [CHUNK, CHUNK, 10], "writes of {piece}");
            assert_eq!(chunks.concat(), bytes);
        }
        assert!(
            matches!(written(&[&bytes[..CHUNK]]), AnswerBody::Whole(Some(b)) if b.len() == CHUNK)
        );
        assert!(written(&[]).is_end_stream());
    }

    #[test]
    fn a_held_answer_is_counted_until_hyper_takes_each_chunk() {
        let counter = Arc::new(AtomicU64::new(0));
        let (answer, mut body) = held(CHUNK * 2 + 10, &counter);
        assert_eq!(counter.load(Ordering::Relaxed), (CHUNK * 2 + 10) as u64);
        let waker = std::task::Waker::noop();
        let mut context = Context::from_waker(waker);
        let first = Pin::new(&mut body).poll_frame(&mut context);
        assert!(matches!(first, Poll::Ready(Some(Ok(_)))));
        assert_eq!(counter.load(Ordering::Relaxed), (CHUNK + 10) as u64);
        assert_eq!(frames(&mut body).len(), 2);
        assert_eq!(counter.load(Ordering::Relaxed), 0);
        assert!(!answer.is_held());
        assert_eq!(answer.cut(), 0, "nothing left to drop");
    }

    #[test]
    fn a_cut_answer_frees_its_bytes_at_once_and_its_body_fails() {
        let counter = Arc::new(AtomicU64::new(0));
        let (answer, mut body) = held(CHUNK * 3, &counter);
        let waker = std::task::Waker::noop();
        let mut context = Context::from_waker(waker);
        let first = Pin::new(&mut body).poll_frame(&mut context);
        assert!(matches!(first, Poll::Ready(Some(Ok(_)))));
        assert_eq!(answer.cut(), (CHUNK * 2) as u64);
        assert_eq!(counter.load(Ordering::Relaxed), 0);
        let rest = frames(&mut body);
        assert!(matches!(rest.as_slice(), [Err(_)]), "{rest:?}");
        drop((body, answer));
        assert_eq!(counter.load(Ordering::Relaxed), 0, "not released twice");
    }

    #[test]
    fn an_answer_dropped_unsent_is_released() {
        let counter = Arc::new(AtomicU64::new(0));
        let (answer, body) = held(CHUNK * 2, &counter);
        assert!(answer.is_held());
        drop((answer, body));
        assert_eq!(counter.load(Ordering::Relaxed), 0);
    }
}
