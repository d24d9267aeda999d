//! Reading what a C caller passes: strings, byte ranges and handles, each checked against NULL
//! before use, so a bad pointer that is NULL becomes [`LOWLAT_E_INVALID_ARGUMENT`] instead of a
//! crash. (A pointer that is neither NULL nor valid cannot be detected: the header states each
//! function's contract.)
//!
//! [`LOWLAT_E_INVALID_ARGUMENT`]: crate::error::LOWLAT_E_INVALID_ARGUMENT

use std::ffi::{c_char, CStr};

use crate::error::Failure;

/// A NUL-terminated UTF-8 string, borrowed for the call.
///
/// # Safety
/// `p` is NULL or points to a NUL-terminated string that stays valid and unchanged during the
/// call.
pub(crate) unsafe fn str_arg<'a>(p: *const c_char, what: &str) -> Result<&'a str, Failure> {
    if p.is_null() {
        return Err(Failure::invalid(format!("{what} is NULL")));
    }
    // SAFETY: not NULL, and the caller promises a NUL-terminated string alive during the call.
    let c = unsafe { CStr::from_ptr(p) };
    c.to_str().map_err(|e| Failure::invalid(format!("{what} is not valid UTF-8 (at byte {})", e.valid_up_to())))
}

/// `len` bytes at `p`, borrowed for the call; `p` may be NULL only when `len` is 0.
///
/// # Safety
/// `p` is NULL or points to `len` readable bytes that stay valid and unchanged during the call.
pub(crate) unsafe fn bytes_arg<'a>(p: *const u8, len: usize, what: &str) -> Result<&'a [u8], Failure> {
    if len == 0 {
        return Ok(&[]);
    }
    if p.is_null() {
        return Err(Failure::invalid(format!("{what} is NULL but its length is {len}")));
    }
    // SAFETY: not NULL, and the caller promises `len` readable bytes alive during the call.
    Ok(unsafe { std::slice::from_raw_parts(p, len) })
}

/// A buffer of `cap` bytes at `p` for lowlat to write to: `p` may be NULL only when `cap` is 0.
pub(crate) fn out_bytes_arg(p: *mut u8, cap: usize, what: &str) -> Result<(), Failure> {
    if p.is_null() && cap > 0 {
        return Err(Failure::invalid(format!("{what} is NULL but {what}_cap is {cap}")));
    }
    Ok(())
}

/// A handle the library gave out, borrowed for the call.
///
/// # Safety
/// `p` is NULL or a live handle of this type, not freed during the call.
pub(crate) unsafe fn handle<'a, T>(p: *const T, what: &str) -> Result<&'a T, Failure> {
    // SAFETY: the caller promises NULL or a live handle.
    unsafe { p.as_ref() }.ok_or_else(|| Failure::invalid(format!("{what} is NULL")))
}

/// A handle the library gave out, borrowed mutably for the call.
///
/// # Safety
/// `p` is NULL or a live handle of this type, used by no other thread during the call.
pub(crate) unsafe fn handle_mut<'a, T>(p: *mut T, what: &str) -> Result<&'a mut T, Failure> {
    // SAFETY: the caller promises NULL or a live handle no one else is using.
    unsafe { p.as_mut() }.ok_or_else(|| Failure::invalid(format!("{what} is NULL")))
}

/// The message a C encoder or decoder returned, copied (`otherwise` if it is empty).
///
/// # Safety
/// `p` is not NULL and points to a NUL-terminated string valid until this returns.
#[cold]
pub(crate) unsafe fn message(p: *const c_char, otherwise: &str) -> String {
    // SAFETY: the caller's contract.
    let m = unsafe { CStr::from_ptr(p) }.to_string_lossy().into_owned();
    if m.is_empty() {
        otherwise.to_string()
    } else {
        m
    }
}
