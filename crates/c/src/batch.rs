//! `lowlat_batch`: many calls in flight on one client from one thread, submitted one by one and
//! collected as they complete (submit and poll, as with io_uring or libcurl's multi interface).
//!
//! [`lowlat_batch_submit`] sends a call at once (if the client has a free slot; else as soon as
//! one frees) and returns; [`lowlat_batch_poll`] hands back the calls that completed, each with
//! the `user_tag` it was submitted with. A batch is the Rust [`runtime::InFlight`] set of async
//! calls ([`runtime::Client::call_with_async`]): the polling thread finds every completed call
//! in one pass and sleeps while none is ready, with no hop to another thread.
//!
//! Memory: a call's arguments are copied at submission (into a buffer of the batch, reused by
//! later calls), so the caller's may be reused at once; its result is written into the buffer
//! the caller gave at submission, which must stay valid until the call's completion is returned
//! (or the batch freed). An error's message lives in the batch until the next poll. After the
//! batch's buffers have grown to the largest arguments seen, submitting and polling allocate
//! nothing (a failed call's message excepted).

use std::cell::RefCell;
use std::collections::VecDeque;
use std::ffi::{c_char, c_int, CString};
use std::future::Future;
use std::rc::Rc;
use std::thread::ThreadId;
use std::time::Duration;

use runtime::{CallOptions, Client, InFlight, OutBuf};

use crate::client::{copy_result, lowlat_client, needed};
use crate::error::{c_message, guard, Failure, ResultTooLong, LOWLAT_E_BATCH_FULL, LOWLAT_OK};
use crate::ffi;
use crate::options::lowlat_call_options;

/// The most calls one batch holds.
const MAX_CAPACITY: usize = 65536;

/// A set of calls in flight on one client: made by `lowlat_batch_new`, freed by
/// `lowlat_batch_free`. It belongs to the thread that made it (its calls wake that thread).
pub struct lowlat_batch {
    calls: Box<dyn Calls>,
    capacity: usize,
    /// The tag of the call at each place of `calls`.
    tags: Vec<u64>,
    /// Completed calls not yet returned by a poll (at most `capacity`, with the calls in flight).
    finished: VecDeque<Finished>,
    /// The messages of the failures the last poll returned.
    messages: Vec<CString>,
    thread: ThreadId,
}

/// One completed call, as `lowlat_batch_poll` returns it.
#[repr(C)]
#[derive(Clone, Copy, Debug)]
pub struct lowlat_completion {
    /// The `user_tag` the call was submitted with.
    pub user_tag: u64,
    /// With `LOWLAT_OK`, the result's length, copied into the call's result buffer; with
    /// `LOWLAT_E_BUFFER_TOO_SMALL`, the length it needed (nothing was copied); else 0.
    pub result_len: usize,
    /// NULL on success; else what went wrong, as `lowlat_last_error` would say it, valid until
    /// the next `lowlat_batch_poll` or `lowlat_batch_free` of the batch.
    pub message: *const c_char,
    /// `LOWLAT_OK`, or the negative `LOWLAT_E_*` code of the call's failure (as
    /// `lowlat_client_call` would return it).
    pub status: c_int,
    /// Whether the procedure may have run: true on success, false only when lowlat knows it did
    /// not.
    pub may_have_executed: bool,
}

/// A completed call not yet handed to C.
struct Finished {
    tag: u64,
    status: c_int,
    len: usize,
    message: Option<CString>,
    may_have_executed: bool,
}

impl Finished {
    fn of(tag: u64, reply: Result<usize, runtime::Error>) -> Finished {
        match reply {
            Ok(len) => Finished { tag, status: LOWLAT_OK.code(), len, message: None, may_have_executed: true },
            Err(e) => {
                let len = needed(&e).unwrap_or(0);
                let f = Failure::from(e);
                Finished {
                    tag,
                    status: f.code.code(),
                    len,
                    message: Some(c_message(&f.message)),
                    may_have_executed: f.may_have_executed,
                }
            }
        }
    }
}

/// Argument buffers: one is lent to each call until its arguments are in its send buffer.
type ArgBuffers = Rc<RefCell<Vec<Vec<u8>>>>;

/// The caller's buffer for a call's result.
#[derive(Clone, Copy)]
struct ResultBuf {
    at: *mut u8,
    cap: usize,
}

/// A batch's calls in flight, whatever the type of their futures.
trait Calls {
    /// Sends a call; its place, or None when every place is taken.
    fn push(&mut self, proc_no: u32, options: &CallOptions, args: &[u8], result: ResultBuf) -> Option<usize>;
    /// Collects completed calls without sleeping (`wait` None), or sleeping until one completes
    /// or the timeout passes (`wait` Some).
    fn collect(&mut self, wait: Option<Option<Duration>>, done: &mut dyn FnMut(usize, Result<usize, runtime::Error>));
    /// Calls in flight.
    fn len(&self) -> usize;
}

/// A call as a future (`start`'s) in a set of them.
struct Set<F: Future> {
    client: &'static Client,
    start: fn(&'static Client, u32, &CallOptions, Vec<u8>, ArgBuffers, ResultBuf) -> F,
    in_flight: InFlight<F>,
    buffers: ArgBuffers,
}

/// A call of `proc_no` with `args` (given back to `buffers` once sent) whose result goes to
/// `result`.
fn start(
    client: &'static Client,
    proc_no: u32,
    options: &CallOptions,
    args: Vec<u8>,
    buffers: ArgBuffers,
    result: ResultBuf,
) -> impl Future<Output = Result<usize, runtime::Error>> + Unpin {
    client.call_with_async(
        proc_no,
        options,
        move |out: &mut OutBuf<'_>| {
            out.extend_from_slice(&args);
            buffers.borrow_mut().push(args);
            Ok::<(), ResultTooLong>(())
        },
        // SAFETY: the caller of lowlat_batch_submit keeps `result.cap` writable bytes at
        // `result.at` until the call's completion is returned or the batch freed; a call's
        // result is decoded in a poll of the batch, before its completion is returned, and
        // never after the batch (with the call) is dropped.
        move |body: &[u8]| unsafe { copy_result(body, result.at, result.cap) },
    )
}

impl<F: Future<Output = Result<usize, runtime::Error>> + Unpin> Calls for Set<F> {
    fn push(&mut self, proc_no: u32, options: &CallOptions, args: &[u8], result: ResultBuf) -> Option<usize> {
        if self.in_flight.is_full() {
            return None;
        }
        let mut buf = self.buffers.borrow_mut().pop().unwrap_or_default();
        buf.clear();
        buf.extend_from_slice(args);
        let call = (self.start)(self.client, proc_no, options, buf, self.buffers.clone(), result);
        self.in_flight.push(call).ok()
    }

    fn collect(&mut self, wait: Option<Option<Duration>>, done: &mut dyn FnMut(usize, Result<usize, runtime::Error>)) {
        match wait {
            None => self.in_flight.poll(done),
            Some(timeout) => self.in_flight.wait(timeout, done),
        };
    }

    fn len(&self) -> usize {
        self.in_flight.len()
    }
}

impl lowlat_batch {
    /// The batch, if this is the thread that made it.
    fn on_its_thread(&mut self) -> Result<&mut lowlat_batch, Failure> {
        if std::thread::current().id() != self.thread {
            return Err(Failure::invalid(
                "the batch is used on another thread than the one that made it (its calls wake that thread)",
            ));
        }
        Ok(self)
    }

    /// Moves completed calls into `finished`.
    fn collect(&mut self, wait: Option<Option<Duration>>) {
        let (tags, finished) = (&self.tags, &mut self.finished);
        self.calls.collect(wait, &mut |place, reply| finished.push_back(Finished::of(tags[place], reply)));
    }

    /// Writes finished calls to `out[n..max]`; how many `out` holds then.
    ///
    /// # Safety
    /// `out` points to `max` writable completions.
    unsafe fn hand_out(&mut self, out: *mut lowlat_completion, max: usize, mut n: usize) -> usize {
        while n < max {
            let Some(f) = self.finished.pop_front() else { break };
            let message = match f.message {
                Some(m) => {
                    // The string's bytes stay where they are while the CString is kept.
                    let at = m.as_ptr();
                    self.messages.push(m);
                    at
                }
                None => std::ptr::null(),
            };
            let c = lowlat_completion {
                user_tag: f.tag,
                result_len: f.len,
                message,
                status: f.status,
                may_have_executed: f.may_have_executed,
            };
            // SAFETY: n < max, and `out` holds `max` writable completions (the caller's
            // contract); written whole, never read.
            unsafe { out.add(n).write(c) };
            n += 1;
        }
        n
    }
}

/// Makes a batch of up to `capacity` calls in flight on `client` (1 to 65536); on success
/// `*out` is the batch, to be freed with `lowlat_batch_free`, on failure NULL.
///
/// A batch belongs to the thread that made it: submit and poll on that thread (another thread
/// gets `LOWLAT_E_INVALID_ARGUMENT`); several threads may each have batches on one client. The
/// client has `lowlat_client_options.slots` call slots (default 64): calls beyond them wait in
/// the batch for a slot, and are sent as slots free.
///
/// # Safety
/// `client` is NULL or a live client that outlives the batch (free the batch first); `out` is
/// NULL or points to a writable pointer.
#[no_mangle]
pub unsafe extern "C" fn lowlat_batch_new(
    client: *const lowlat_client,
    capacity: usize,
    out: *mut *mut lowlat_batch,
) -> c_int {
    guard(|| {
        // SAFETY: the caller's contract, as stated above.
        let out = unsafe { out.as_mut() }.ok_or_else(|| Failure::invalid("out is NULL"))?;
        *out = std::ptr::null_mut();
        // SAFETY: the caller's contract: a live client, which outlives the batch, so the batch
        // may hold it for as long as it lives.
        let client: &'static lowlat_client = unsafe { ffi::handle(client, "client")? };
        if !(1..=MAX_CAPACITY).contains(&capacity) {
            return Err(Failure::invalid(format!("capacity is {capacity}, not between 1 and {MAX_CAPACITY}")));
        }
        let set = Set {
            client: client.rust(),
            start,
            in_flight: InFlight::new(capacity),
            buffers: Rc::new(RefCell::new((0..capacity).map(|_| Vec::new()).collect())),
        };
        let batch = lowlat_batch {
            calls: Box::new(set),
            capacity,
            tags: vec![0; capacity],
            finished: VecDeque::with_capacity(capacity),
            messages: Vec::with_capacity(capacity),
            thread: std::thread::current().id(),
        };
        *out = Box::into_raw(Box::new(batch));
        Ok(LOWLAT_OK.code())
    })
}

/// Frees a batch (NULL is ignored), abandoning the calls still in flight: their procedures may
/// have run, and their result buffers are not written after this returns. Completions not yet
/// returned by `lowlat_batch_poll` are dropped. Call it on the thread that made the batch.
///
/// # Safety
/// `batch` is NULL or a batch from `lowlat_batch_new` not freed before, used by no other call
/// during this one.
#[no_mangle]
pub unsafe extern "C" fn lowlat_batch_free(batch: *mut lowlat_batch) {
    guard(|| {
        if !batch.is_null() {
            // SAFETY: the caller gives back a batch made by Box::into_raw, freed only here.
            drop(unsafe { Box::from_raw(batch) });
        }
        Ok(LOWLAT_OK.code())
    });
}

/// Submits a call of procedure `proc` with the `args_len` bytes at `args` as its arguments (in
/// the binding's encoding, see `lowlat_client_encoding`), sent at once if the client has a free
/// slot. The arguments are copied: `args` may be reused as soon as this returns. The result will
/// be copied into `result`, which holds `result_cap` bytes and must stay valid and untouched
/// until the call's completion is returned by `lowlat_batch_poll` (or the batch freed); a longer
/// result completes with `LOWLAT_E_BUFFER_TOO_SMALL`. `user_tag` is returned with the completion.
/// `options` is NULL or the call's options (its deadline: 0 is the binding's).
///
/// Returns `LOWLAT_OK`, or `LOWLAT_E_BATCH_FULL` when the batch holds `capacity` calls not yet
/// returned by a poll (nothing is sent; poll first), or `LOWLAT_E_INVALID_ARGUMENT`. A call's
/// own failure (an unknown procedure, a timeout, ...) is reported by its completion.
///
/// # Safety
/// `batch` is NULL or a live batch; `args` points to `args_len` readable bytes (NULL when
/// `args_len` is 0); `result` points to `result_cap` writable bytes (NULL when `result_cap` is
/// 0) that stay valid as stated above; `options` is NULL or readable.
#[no_mangle]
pub unsafe extern "C" fn lowlat_batch_submit(
    batch: *mut lowlat_batch,
    proc: u32,
    args: *const u8,
    args_len: usize,
    result: *mut u8,
    result_cap: usize,
    user_tag: u64,
    options: *const lowlat_call_options,
) -> c_int {
    guard(|| {
        // SAFETY: the caller's contract, as stated above.
        let (batch, args, options) = unsafe {
            (ffi::handle_mut(batch, "batch")?, ffi::bytes_arg(args, args_len, "args")?, options.as_ref().copied())
        };
        let batch = batch.on_its_thread()?;
        ffi::out_bytes_arg(result, result_cap, "result")?;
        if batch.calls.len() + batch.finished.len() >= batch.capacity {
            return Err(Failure::new(
                LOWLAT_E_BATCH_FULL,
                format!(
                    "the batch is full: {} calls in flight and {} completions not yet polled (capacity {})",
                    batch.calls.len(),
                    batch.finished.len(),
                    batch.capacity
                ),
                false,
            ));
        }
        let options = options.unwrap_or_default().to_rust();
        let place = batch
            .calls
            .push(proc, &options, args, ResultBuf { at: result, cap: result_cap })
            .ok_or_else(|| Failure::new(LOWLAT_E_BATCH_FULL, "every place of the batch is taken", false))?;
        batch.tags[place] = user_tag;
        Ok(LOWLAT_OK.code())
    })
}

/// Returns completed calls: writes up to `max` completions to `completions` and returns how
/// many (0 to `max`), or a negative `LOWLAT_E_*` code. Waits for at least one when none is
/// ready: `timeout_us` 0 never sleeps, a positive value sleeps at most that many microseconds,
/// a negative one until a call completes (each call ends by its deadline). Returns 0 at once
/// when no call is in flight. A completed call's result is in the buffer it was submitted with;
/// the completions' messages stay valid until the next poll or `lowlat_batch_free`.
///
/// Completions beyond `max` wait for the next poll (and count against the batch's capacity
/// until then).
///
/// # Safety
/// `batch` is NULL or a live batch; `completions` points to `max` writable `lowlat_completion`s.
#[no_mangle]
pub unsafe extern "C" fn lowlat_batch_poll(
    batch: *mut lowlat_batch,
    timeout_us: i64,
    completions: *mut lowlat_completion,
    max: usize,
) -> c_int {
    guard(|| {
        // SAFETY: the caller's contract, as stated above.
        let batch = unsafe { ffi::handle_mut(batch, "batch")? }.on_its_thread()?;
        if completions.is_null() {
            return Err(Failure::invalid("completions is NULL"));
        }
        if max == 0 {
            return Err(Failure::invalid("max is 0: no completion could be returned"));
        }
        // At most `capacity` are finished or in flight, and c_int holds MAX_CAPACITY.
        let max = max.min(batch.capacity);
        batch.messages.clear();
        // SAFETY: `completions` holds at least `max` writable completions (the caller's contract).
        let mut n = unsafe { batch.hand_out(completions, max, 0) };
        if n < max {
            batch.collect(None);
            // SAFETY: as above.
            n = unsafe { batch.hand_out(completions, max, n) };
        }
        if n == 0 && timeout_us != 0 {
            let timeout = u64::try_from(timeout_us).ok().map(Duration::from_micros);
            batch.collect(Some(timeout));
            // SAFETY: as above.
            n = unsafe { batch.hand_out(completions, max, n) };
        }
        Ok(n as c_int)
    })
}

/// Calls submitted to the batch whose completions have not yet been returned by a poll (in
/// flight, or completed and waiting for the next poll); `LOWLAT_E_INVALID_ARGUMENT` if `batch`
/// is NULL.
///
/// # Safety
/// `batch` is NULL or a live batch.
#[no_mangle]
pub unsafe extern "C" fn lowlat_batch_pending(batch: *const lowlat_batch) -> c_int {
    guard(|| {
        // SAFETY: the caller's contract, as stated above.
        let batch = unsafe { ffi::handle(batch, "batch")? };
        Ok((batch.calls.len() + batch.finished.len()) as c_int)
    })
}
