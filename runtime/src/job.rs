//! A queued write call (`Job`) and the two ends of the channel its answer travels on: `Reply`,
//! which goes with the job and then with its group, and `WriteReply`, which its caller waits on.
//!
//! Plain data: it must not know the inbox that queues jobs, the owner that runs them, nor the
//! group that carries their answers.

use std::sync::Arc;

use pure_lang::{Answer, App, HandlerError, Request};
use tokio::sync::oneshot;

/// Where a write's answer goes: sent once its group is durable (or refused).
pub(crate) type Reply = oneshot::Sender<Result<Answer, HandlerError>>;

/// What the caller of `Runtime::write` waits on.
pub type WriteReply = oneshot::Receiver<Result<Answer, HandlerError>>;

/// A queued write.
pub(crate) struct Job {
    /// The version of the app the request was checked against; it runs on that version even
    /// if a reload replaced it meanwhile (the schema, which the tables depend on, is the same).
    pub app: Arc<App>,
    pub work: Work,
    pub reply: Reply,
}

/// What a job runs.
pub(crate) enum Work {
    /// A write handler's call.
    Call { handler: String, request: Request },
    /// The schedule's entries due now, each as a write of its own, for a slice of the owner's
    /// time at most; the manifest's named entries made first where missing.
    Due,
}
