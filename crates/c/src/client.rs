//! `lowlat_client`: a binding to one program version at one URI, shared by any number of
//! threads (calls from several threads proceed in parallel on separate slots, as with the Rust
//! client it wraps).
//!
//! Two ways to call. [`lowlat_client_call`] copies the arguments in and the result out of
//! caller-owned buffers. [`lowlat_client_invoke`], which generated stubs use, has a C encoder
//! append the arguments straight into the call's send buffer and a C decoder read the result
//! where it lies, as a Rust stub does: no copy on either side.

use std::ffi::{c_char, c_int, c_void};

use runtime::{ByteOrder, CallOptions, Client};

use crate::error::{guard, CodecMessage, Failure, ResultTooLong, LOWLAT_OK};
use crate::ffi;
use crate::options::{
    lowlat_call_options, lowlat_client_options, LOWLAT_ENCODING_NATIVE_BIG, LOWLAT_ENCODING_NATIVE_LITTLE,
    LOWLAT_ENCODING_XDR,
};
use crate::out::{lend, lowlat_out};

/// A client: made by `lowlat_client_connect`, freed by `lowlat_client_free`. Thread-safe: any
/// number of threads may call through one client at once.
pub struct lowlat_client {
    inner: Client,
}

impl lowlat_client {
    /// The Rust client.
    pub(crate) fn rust(&self) -> &Client {
        &self.inner
    }
}

/// Appends a call's arguments to `args` in `encoding` (one of `LOWLAT_ENCODING_*`) with
/// `lowlat_out_append` or `lowlat_out_grow`. Returns NULL on success, or a message saying why
/// the arguments cannot be encoded (a NUL-terminated string valid until the callback's caller
/// returns; lowlat copies it into its error).
pub type lowlat_encode_fn =
    Option<unsafe extern "C" fn(ctx: *mut c_void, args: *mut lowlat_out, encoding: c_int) -> *const c_char>;

/// Reads a call's result, `len` bytes at `body` in `encoding`, valid only during the callback
/// (copy what must outlive it). Returns NULL on success, or a message saying why the result
/// cannot be decoded (as for `lowlat_encode_fn`).
pub type lowlat_decode_fn =
    Option<unsafe extern "C" fn(ctx: *mut c_void, body: *const u8, len: usize, encoding: c_int) -> *const c_char>;

/// The encoding bodies travel in on this binding: XDR over ONC RPC, else the native encoding in
/// the server's byte order (only the client converts).
fn encoding(c: &Client) -> c_int {
    if c.is_onc() {
        return LOWLAT_ENCODING_XDR;
    }
    match c.server_byte_order() {
        ByteOrder::Little => LOWLAT_ENCODING_NATIVE_LITTLE,
        ByteOrder::Big => LOWLAT_ENCODING_NATIVE_BIG,
    }
}

/// Connects to the server at `uri` (`udp://HOST:PORT`, `tcp://HOST:PORT`, `shm://PATH`,
/// `eth://IFACE[/MAC]`, `xdp://IFACE[/MAC]`, `onc+udp://HOST[:PORT]`, `onc+tcp://HOST[:PORT]`)
/// and binds to `program` `version` with default settings. On success `*out` is the client, to be
/// freed with `lowlat_client_free`; on failure `*out` is NULL.
///
/// # Safety
/// `uri` is NULL or a NUL-terminated string; `out` is NULL or points to a writable pointer.
#[no_mangle]
pub unsafe extern "C" fn lowlat_client_connect(
    uri: *const c_char,
    program: u32,
    version: u32,
    out: *mut *mut lowlat_client,
) -> c_int {
    // SAFETY: the same contract.
    unsafe { lowlat_client_connect_with(uri, program, version, std::ptr::null(), out) }
}

/// `lowlat_client_connect` with `options` (NULL: the defaults).
///
/// # Safety
/// As `lowlat_client_connect`; `options` is NULL or points to a readable `lowlat_client_options`
/// whose `psk_file` is NULL or a NUL-terminated string valid during the call.
#[no_mangle]
pub unsafe extern "C" fn lowlat_client_connect_with(
    uri: *const c_char,
    program: u32,
    version: u32,
    options: *const lowlat_client_options,
    out: *mut *mut lowlat_client,
) -> c_int {
    guard(|| {
        // SAFETY: the caller's contract, as stated above.
        let out = unsafe { out.as_mut() }.ok_or_else(|| Failure::invalid("out is NULL"))?;
        *out = std::ptr::null_mut();
        // SAFETY: the caller's contract, as stated above.
        let (uri, options) = unsafe { (ffi::str_arg(uri, "uri")?, options.as_ref().copied().unwrap_or_default()) };
        // SAFETY: the caller's contract, as stated above (`psk_file`).
        let cfg = unsafe { options.config() }?;
        let inner = Client::connect_with(uri, program, version, cfg)?;
        *out = Box::into_raw(Box::new(lowlat_client { inner }));
        Ok(LOWLAT_OK.code())
    })
}

/// Frees a client (NULL is ignored). No call through it may be running or made afterwards.
///
/// # Safety
/// `client` is NULL or a client from `lowlat_client_connect` not freed before.
#[no_mangle]
pub unsafe extern "C" fn lowlat_client_free(client: *mut lowlat_client) {
    guard(|| {
        if !client.is_null() {
            // SAFETY: the caller gives back a client made by Box::into_raw, freed only here.
            drop(unsafe { Box::from_raw(client) });
        }
        Ok(LOWLAT_OK.code())
    });
}

/// The encoding of message bodies on this binding: `LOWLAT_ENCODING_XDR` over ONC RPC, else
/// the native encoding in the server's byte order; `LOWLAT_E_INVALID_ARGUMENT` if `client` is
/// NULL.
///
/// # Safety
/// `client` is NULL or a live client.
#[no_mangle]
pub unsafe extern "C" fn lowlat_client_encoding(client: *const lowlat_client) -> c_int {
    // SAFETY: the caller's contract, as stated above.
    guard(|| Ok(encoding(&unsafe { ffi::handle(client, "client")? }.inner)))
}

/// The largest argument or result message this binding carries (0 if `client` is NULL).
///
/// # Safety
/// `client` is NULL or a live client.
#[no_mangle]
pub unsafe extern "C" fn lowlat_client_max_message(client: *const lowlat_client) -> usize {
    let mut max = 0;
    guard(|| {
        // SAFETY: the caller's contract, as stated above.
        max = unsafe { ffi::handle(client, "client")? }.inner.max_message();
        Ok(LOWLAT_OK.code())
    });
    max
}

/// Calls procedure `proc` with the `args_len` bytes at `args` as its arguments (in the binding's
/// encoding, see `lowlat_client_encoding`) and copies the result into `result`, which holds
/// `result_cap` bytes; its length goes to `*result_len`. A result longer than `result_cap` is
/// not copied at all: the call returns `LOWLAT_E_BUFFER_TOO_SMALL` with the length needed in
/// `*result_len` (the procedure has run; its result is lost). Uses the binding's deadline.
///
/// # Safety
/// `client` is NULL or a live client; `args` points to `args_len` readable bytes (NULL when
/// `args_len` is 0); `result` points to `result_cap` writable bytes (NULL when `result_cap` is
/// 0); `result_len` is NULL or writable.
#[no_mangle]
pub unsafe extern "C" fn lowlat_client_call(
    client: *const lowlat_client,
    proc: u32,
    args: *const u8,
    args_len: usize,
    result: *mut u8,
    result_cap: usize,
    result_len: *mut usize,
) -> c_int {
    // SAFETY: the same contract.
    unsafe { call(client, proc, CallOptions::new(), args, args_len, result, result_cap, result_len) }
}

/// `lowlat_client_call`, failing with `LOWLAT_E_TIMEOUT` unless the call completes within
/// `deadline_ns` nanoseconds (0: the binding's deadline).
///
/// # Safety
/// As `lowlat_client_call`.
#[no_mangle]
pub unsafe extern "C" fn lowlat_client_call_deadline(
    client: *const lowlat_client,
    proc: u32,
    args: *const u8,
    args_len: usize,
    result: *mut u8,
    result_cap: usize,
    result_len: *mut usize,
    deadline_ns: u64,
) -> c_int {
    let options = lowlat_call_options { deadline_ns }.to_rust();
    // SAFETY: the same contract.
    unsafe { call(client, proc, options, args, args_len, result, result_cap, result_len) }
}

/// The body of `lowlat_client_call` and `lowlat_client_call_deadline`.
///
/// # Safety
/// As `lowlat_client_call`.
#[allow(clippy::too_many_arguments)]
unsafe fn call(
    client: *const lowlat_client,
    proc: u32,
    options: CallOptions,
    args: *const u8,
    args_len: usize,
    result: *mut u8,
    result_cap: usize,
    result_len: *mut usize,
) -> c_int {
    guard(|| {
        // SAFETY: the caller's contract, as stated on lowlat_client_call.
        let (client, args) = unsafe { (ffi::handle(client, "client")?, ffi::bytes_arg(args, args_len, "args")?) };
        ffi::out_bytes_arg(result, result_cap, "result")?;
        let set_len = |n: usize| {
            // SAFETY: the caller's contract: result_len is NULL or writable.
            if let Some(l) = unsafe { result_len.as_mut() } {
                *l = n;
            }
        };
        let copied = client.inner.call_with(
            proc,
            &options,
            |buf| {
                buf.extend_from_slice(args);
                Ok::<(), ResultTooLong>(())
            },
            // SAFETY: `result` holds `result_cap` writable bytes (the caller's contract).
            |body| unsafe { copy_result(body, result, result_cap) },
        );
        match copied {
            Ok(n) => {
                set_len(n);
                Ok(LOWLAT_OK.code())
            }
            Err(e) => {
                if let Some(n) = needed(&e) {
                    set_len(n);
                }
                Err(e.into())
            }
        }
    })
}

/// Copies a result into the caller's buffer of `cap` bytes at `to`; its length, or
/// [`ResultTooLong`] (nothing copied) when it does not fit.
///
/// # Safety
/// `to` points to `cap` writable bytes (it may be NULL when `cap` is 0), valid during the call.
pub(crate) unsafe fn copy_result(body: &[u8], to: *mut u8, cap: usize) -> Result<usize, ResultTooLong> {
    if body.len() > cap {
        return Err(ResultTooLong { needed: body.len(), cap });
    }
    if !body.is_empty() {
        // SAFETY: `to` holds `cap` >= body.len() writable bytes (the caller's contract), and
        // cannot overlap lowlat's receive buffer.
        unsafe { std::ptr::copy_nonoverlapping(body.as_ptr(), to, body.len()) };
    }
    Ok(body.len())
}

/// The length a result needed, when `e` says it did not fit the caller's buffer.
pub(crate) fn needed(e: &runtime::Error) -> Option<usize> {
    match e {
        runtime::Error::Decode { source, .. } => source.downcast_ref::<ResultTooLong>().map(|t| t.needed),
        _ => None,
    }
}

/// Calls procedure `proc`: `encode` (NULL: no arguments) appends the arguments to the call's
/// send buffer, and `decode` (NULL: the procedure has no result, and a non-empty one is an
/// error) reads the result where it lies, each told the binding's encoding. `options` is NULL or
/// the call's options. What generated client functions call.
///
/// An encoder's message fails the call with `LOWLAT_E_ENCODE` (nothing is sent), a decoder's
/// with `LOWLAT_E_DECODE` (the procedure has run); `lowlat_last_error` then includes what
/// the callback said.
///
/// # Safety
/// `client` is NULL or a live client; `options` is NULL or readable; `encode` and `decode` are
/// NULL or functions with the contracts of `lowlat_encode_fn` and `lowlat_decode_fn`, called on
/// this thread with `encode_ctx` and `decode_ctx`.
#[no_mangle]
pub unsafe extern "C" fn lowlat_client_invoke(
    client: *const lowlat_client,
    proc: u32,
    options: *const lowlat_call_options,
    encode: lowlat_encode_fn,
    encode_ctx: *mut c_void,
    decode: lowlat_decode_fn,
    decode_ctx: *mut c_void,
) -> c_int {
    guard(|| {
        // SAFETY: the caller's contract, as stated above.
        let (client, options) = unsafe { (ffi::handle(client, "client")?, options.as_ref().copied()) };
        let client = &client.inner;
        // Asked only of a binding whose call has arguments or a result to code.
        let enc = || encoding(client);
        let options = options.unwrap_or_default().to_rust();
        client.call_with(
            proc,
            &options,
            |out| {
                let Some(encode) = encode else { return Ok(()) };
                // SAFETY: `encode` has lowlat_encode_fn's contract (the caller's promise); the
                // buffer is lent for this call only.
                let why = unsafe { encode(encode_ctx, lend(out), enc()) };
                if why.is_null() {
                    return Ok(());
                }
                // SAFETY: an encoder returns NULL or a string valid until now.
                Err(CodecMessage(unsafe { ffi::message(why, "the encoder failed") }))
            },
            |body| {
                let Some(decode) = decode else {
                    return match body.len() {
                        0 => Ok(()),
                        n => Err(CodecMessage(format!("expected no result, got {n} bytes"))),
                    };
                };
                // SAFETY: `decode` has lowlat_decode_fn's contract (the caller's promise); `body`
                // is readable for the callback's duration.
                let why = unsafe { decode(decode_ctx, body.as_ptr(), body.len(), enc()) };
                if why.is_null() {
                    return Ok(());
                }
                // SAFETY: a decoder returns NULL or a string valid until now.
                Err(CodecMessage(unsafe { ffi::message(why, "the decoder failed") }))
            },
        )?;
        Ok(LOWLAT_OK.code())
    })
}
