//! `lowlat_out`: the buffer a C encoder appends to, a call's arguments on the client and a
//! procedure's result on the server. It is lowlat's `OutBuf`: over shared memory a call's
//! arguments lie in the call ring and a result in the result ring, so what C code appends is
//! written once, where the other side reads it.

use std::ffi::c_int;

use runtime::OutBuf;

use crate::error::{guard, Failure, LOWLAT_OK};
use crate::ffi;

/// A buffer to append a message body to, lent to a callback for its duration only.
pub struct lowlat_out {
    _lent: [u8; 0],
}

/// The buffer behind a handle.
///
/// # Safety
/// `p` is NULL or a handle lent to the running callback, which is the only code using it.
unsafe fn buffer<'a, 'b>(p: *mut lowlat_out) -> Result<&'a mut OutBuf<'b>, Failure> {
    // SAFETY: a lent handle is a pointer to a live OutBuf (see `lend`), used by this callback
    // alone.
    unsafe { ffi::handle_mut(p.cast::<OutBuf<'b>>(), "out") }
}

/// A handle for `buf`, valid while `buf` is borrowed.
pub(crate) fn lend(buf: &mut OutBuf<'_>) -> *mut lowlat_out {
    (buf as *mut OutBuf<'_>).cast()
}

/// Appends `len` bytes from `bytes` (NULL only when `len` is 0).
///
/// # Safety
/// `out` is the buffer lent to the running callback; `bytes` points to `len` readable bytes.
#[no_mangle]
pub unsafe extern "C" fn lowlat_out_append(out: *mut lowlat_out, bytes: *const u8, len: usize) -> c_int {
    guard(|| {
        // SAFETY: the caller's contract, as stated above.
        let (out, bytes) = unsafe { (buffer(out)?, ffi::bytes_arg(bytes, len, "bytes")?) };
        out.extend_from_slice(bytes);
        Ok(LOWLAT_OK.code())
    })
}

/// Appends `n` zero bytes and returns where they start, for an encoder to write them in place;
/// NULL if `out` is NULL. The pointer is valid until the next call on `out`.
///
/// # Safety
/// `out` is the buffer lent to the running callback.
#[no_mangle]
pub unsafe extern "C" fn lowlat_out_grow(out: *mut lowlat_out, n: usize) -> *mut u8 {
    let mut at = std::ptr::null_mut();
    guard(|| {
        // SAFETY: the caller's contract, as stated above.
        let out = unsafe { buffer(out)? };
        let start = out.len();
        let end = start.checked_add(n).ok_or_else(|| Failure::invalid(format!("growing by {n} bytes overflows")))?;
        out.resize(end, 0);
        at = out[start..].as_mut_ptr();
        Ok(LOWLAT_OK.code())
    });
    at
}

/// Bytes appended so far (0 if `out` is NULL).
///
/// # Safety
/// `out` is the buffer lent to the running callback.
#[no_mangle]
pub unsafe extern "C" fn lowlat_out_len(out: *mut lowlat_out) -> usize {
    let mut len = 0;
    guard(|| {
        // SAFETY: the caller's contract, as stated above.
        len = unsafe { buffer(out)? }.len();
        Ok(LOWLAT_OK.code())
    });
    len
}

/// Shortens the buffer to `len` bytes (nothing happens if it is shorter already).
///
/// # Safety
/// `out` is the buffer lent to the running callback.
#[no_mangle]
pub unsafe extern "C" fn lowlat_out_truncate(out: *mut lowlat_out, len: usize) -> c_int {
    guard(|| {
        // SAFETY: the caller's contract, as stated above.
        unsafe { buffer(out)? }.truncate(len);
        Ok(LOWLAT_OK.code())
    })
}
