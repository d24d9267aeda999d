//! An async call over several servers ([`Spread::call_async`]): what a blocking call over
//! several servers does (`super::spread`), as a future. The arguments are encoded once, when
//! the call is made, into a buffer the member calls copy from; a member that refuses a call that
//! did not run (or that may have run, for an idempotent call) hands its decoder back and the call
//! goes on to the next member, within the same future.
//!
//! The buffer is shared between the future and the member call that is sending it (an `Arc`,
//! since a future may move between threads); finished buffers are kept per thread for the next
//! call ([`SPARE_KEPT`] at most), so a thread that makes calls one after another allocates none
//! once it has some.

use std::cell::RefCell;
use std::future::Future;
use std::pin::Pin;
use std::sync::Arc;
use std::task::{Context, Poll};
use std::time::Duration;

use lowlat_codec::OutBuf;

use super::call_async::LowlatCall;
use super::onc::OncCall;
use super::spread::{is_the_servers, Picked, Spread};
use super::{Client, OneServer};
use crate::Error;

/// Argument buffers a thread keeps for its next calls.
const SPARE_KEPT: usize = 64;

thread_local! {
    /// Argument buffers of async calls over several servers that ended on this thread.
    static SPARE: RefCell<Vec<Arc<Vec<u8>>>> = const { RefCell::new(Vec::new()) };
}

/// A buffer for a call's arguments: a spare one of this thread's, or a new one.
fn spare_args() -> Arc<Vec<u8>> {
    SPARE.try_with(|s| s.borrow_mut().pop()).ok().flatten().unwrap_or_default()
}

/// Keeps `args` for this thread's next call, if nothing else holds it and the thread keeps
/// fewer than [`SPARE_KEPT`].
fn keep_args(mut args: Arc<Vec<u8>>) {
    if Arc::get_mut(&mut args).is_none() {
        return;
    }
    let _ = SPARE.try_with(|s| {
        let mut s = s.borrow_mut();
        if s.len() < SPARE_KEPT {
            s.push(args);
        }
    });
}

/// A member call that gives its decoder back when it failed before a reply used it.
pub(crate) trait Redirectable<Dec> {
    fn take_decode(&mut self) -> Option<Dec>;
}

impl<R, E, EncL, EncO, Dec> Redirectable<Dec>
    for OneServer<LowlatCall<'_, R, E, EncL, Dec>, OncCall<'_, R, E, EncO, Dec>>
{
    fn take_decode(&mut self) -> Option<Dec> {
        match self {
            OneServer::Lowlat(c) => c.take_decode(),
            OneServer::Onc(c) => c.take_decode(),
            OneServer::Failed(_) => None,
        }
    }
}

/// The call on member `client`, its arguments copied from `args`.
#[allow(clippy::type_complexity)]
fn start_on<'a, R, E, Dec>(
    client: &'a Client,
    proc_no: u32,
    timeout: Option<Duration>,
    args: Arc<Vec<u8>>,
    decode: Dec,
) -> OneServer<
    LowlatCall<'a, R, E, impl FnOnce(&mut OutBuf<'_>) -> Result<(), E>, Dec>,
    OncCall<'a, R, E, impl FnOnce(&mut OutBuf<'_>) -> Result<(), E>, Dec>,
>
where
    E: std::error::Error + Send + Sync + 'static,
    Dec: FnOnce(&[u8]) -> Result<R, E>,
{
    let encode = move |out: &mut OutBuf<'_>| {
        out.extend_from_slice(&args);
        Ok(())
    };
    client.one_server_async(proc_no, timeout, encode, decode)
}

/// How a member call is started: [`start_on`].
type StartOn<'a, Dec, M> = fn(&'a Client, u32, Option<Duration>, Arc<Vec<u8>>, Dec) -> M;

/// One async call over several servers.
struct SpreadCall<'a, Dec, M> {
    spread: &'a Spread,
    proc_no: u32,
    timeout: Option<Duration>,
    idempotent: bool,
    /// The encoded arguments (taken back when the call ends).
    args: Option<Arc<Vec<u8>>>,
    /// The decoder, while no member call holds it.
    decode: Option<Dec>,
    /// The member called now, and its call.
    on: Option<(Picked<'a>, M)>,
    /// The members tried (a bit each).
    tried: u64,
    /// What each member that refused the call said.
    said: Vec<(Arc<str>, String)>,
    start: StartOn<'a, Dec, M>,
    /// Why the call failed before any member took it, told by the first poll (boxed: rare, and
    /// the future is the smaller for it).
    failed: Option<Box<Error>>,
}

impl<Dec, M> Unpin for SpreadCall<'_, Dec, M> {}

impl<Dec, M> Drop for SpreadCall<'_, Dec, M> {
    fn drop(&mut self) {
        // The member call first: until it has sent, it holds the arguments too.
        self.on = None;
        if let Some(args) = self.args.take() {
            keep_args(args);
        }
    }
}

impl<'a, Dec, M> SpreadCall<'a, Dec, M> {
    /// Starts the call on the next member that can take it (a member never connected is
    /// connected first); fails when none is left.
    fn next_member(&mut self) -> Result<(), Error> {
        while let Some(picked) = self.spread.pick(self.tried) {
            self.tried |= 1 << picked.index();
            let Some(client) = self.spread.member_client(&picked, &mut self.said) else { continue };
            let (Some(args), Some(decode)) = (self.args.clone(), self.decode.take()) else { break };
            let call = (self.start)(client, self.proc_no, self.timeout, args, decode);
            self.on = Some((picked, call));
            return Ok(());
        }
        Err(self.spread.no_server(std::mem::take(&mut self.said)))
    }
}

impl<R, Dec, M> Future for SpreadCall<'_, Dec, M>
where
    M: Future<Output = Result<R, Error>> + Unpin + Redirectable<Dec>,
{
    type Output = Result<R, Error>;

    fn poll(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<Self::Output> {
        let this = &mut *self;
        loop {
            if let Some(e) = this.failed.take() {
                return Poll::Ready(Err(*e));
            }
            let Some((picked, call)) = this.on.as_mut() else {
                return Poll::Ready(Err(Error::Io {
                    op: "a call polled after it completed".into(),
                    source: std::io::ErrorKind::Other.into(),
                }));
            };
            let r = std::task::ready!(Pin::new(call).poll(cx));
            picked.outcome(&r);
            let (picked, mut call) = this.on.take().expect("polled above");
            match r {
                Err(e) if is_the_servers(&e) && (this.idempotent || !e.may_have_executed()) => {
                    let Some(decode) = call.take_decode() else { return Poll::Ready(Err(e)) };
                    drop(call);
                    this.spread.moved_on(&picked, &e, &mut this.said);
                    drop(picked);
                    this.decode = Some(decode);
                    this.failed = this.next_member().err().map(Box::new);
                }
                r => return Poll::Ready(r),
            }
        }
    }
}

impl Spread {
    /// One call as a future: the arguments encoded now, the call sent to the member picked now
    /// (if it has a free slot), and on to the next member while one refuses it.
    pub(crate) fn call_async<'a, R, E, Enc, Dec>(
        &'a self,
        proc_no: u32,
        timeout: Option<Duration>,
        idempotent: bool,
        encode: Enc,
        decode: Dec,
    ) -> impl Future<Output = Result<R, Error>> + Unpin + 'a
    where
        R: 'a,
        E: std::error::Error + Send + Sync + 'static,
        Enc: FnOnce(&mut OutBuf<'_>) -> Result<(), E>,
        Dec: FnOnce(&[u8]) -> Result<R, E> + 'a,
    {
        let mut args = spare_args();
        let buf = Arc::make_mut(&mut args);
        buf.clear();
        let encoded = encode(&mut OutBuf::from(buf));
        let mut call = SpreadCall {
            spread: self,
            proc_no,
            timeout,
            idempotent,
            args: Some(args),
            decode: Some(decode),
            on: None,
            tried: 0,
            said: Vec::new(),
            start: start_on::<R, E, Dec>,
            failed: None,
        };
        call.failed = match encoded {
            Err(e) => Some(Box::new(Error::Encode { call: self.site(proc_no), source: Box::new(e) })),
            Ok(()) => call.next_member().err().map(Box::new),
        };
        call
    }
}
