//! `lowlat_server`: programs whose procedures are C callbacks, served on URIs.
//!
//! A server is built (procedures added), then served, then stopped; it may be served again. Its
//! functions are for one managing thread at a time; the procedures run on the serving threads
//! (one per URI) or, when added long-running, on the server's worker pool.

use std::collections::HashSet;
use std::ffi::{c_char, c_int, c_void, CString};
use std::sync::Mutex;

use runtime::{ByteOrder, CallContext, OutBuf, ProcError, Program, Server, ServerConfig};

use crate::error::{guard, Failure, LOWLAT_OK};
use crate::ffi;
use crate::options::spin_policy;
use crate::out::{lend, lowlat_out};

/// What a procedure knows about the call it serves.
#[repr(C)]
#[derive(Clone, Copy, Debug)]
pub struct lowlat_call {
    /// The program number the call named (as in the `.x` file).
    pub program: u32,
    /// The version of that program.
    pub version: u32,
    /// The procedure number within that version.
    pub procedure: u32,
    /// The calling machine is big-endian (arguments arrive in the server's order regardless).
    pub client_big_endian: bool,
    /// The call carried AUTH_SYS credentials (ONC RPC): `uid` and `gid` are the caller's.
    pub has_auth_sys: bool,
    /// The caller's user id, as the AUTH_SYS credentials state it (unverified; 0 without them).
    pub uid: u32,
    /// The caller's group id, as the AUTH_SYS credentials state it (unverified; 0 without them).
    pub gid: u32,
}

/// The procedure succeeded: its result is what it appended to `result`.
pub const LOWLAT_PROC_OK: c_int = 0;
/// The arguments could not be decoded: the caller gets `LOWLAT_E_GARBAGE_ARGS`.
pub const LOWLAT_PROC_GARBAGE_ARGS: c_int = 1;
/// The procedure failed: the caller gets `LOWLAT_E_SERVER_ERROR` (so does any other status).
pub const LOWLAT_PROC_FAILED: c_int = 2;

/// A procedure's bodies are XDR: it is served to ONC RPC callers (`onc+udp://`, `onc+tcp://`).
/// Without it, lowlat's native encoding, in this machine's byte order, for lowlat's own
/// transports.
pub const LOWLAT_PROCEDURE_XDR: u32 = 1;
/// The procedure runs on the server's worker pool instead of the thread that received the call
/// (for procedures that take long or block: they would hold up the calls behind them).
pub const LOWLAT_PROCEDURE_LONG_RUNNING: u32 = 2;

/// A procedure: reads `args_len` bytes of arguments at `args` (valid only during the call),
/// appends its result to `result` (`lowlat_out_append`, `lowlat_out_grow`) and returns a status
/// (`LOWLAT_PROC_*`). `call` is valid during the call. It may run on several threads at once.
pub type lowlat_procedure = Option<
    unsafe extern "C" fn(
        user: *mut c_void,
        call: *const lowlat_call,
        args: *const u8,
        args_len: usize,
        result: *mut lowlat_out,
    ) -> c_int,
>;

/// A server: made by `lowlat_server_new`, freed by `lowlat_server_free`.
pub struct lowlat_server {
    programs: Vec<Program>,
    config: ServerConfig,
    running: Option<Server>,
    uris: Vec<CString>,
}

/// The user pointer a procedure was added with.
#[derive(Clone, Copy)]
struct User(*mut c_void);

// SAFETY: lowlat_server_add_procedure's contract: the user pointer may be used from any thread
// (the procedure is called on the serving threads, several at once).
unsafe impl Send for User {}
// SAFETY: as above.
unsafe impl Sync for User {}

impl User {
    /// The pointer (a method, so that closures capture the whole `User`, which is `Send`).
    fn get(self) -> *mut c_void {
        self.0
    }
}

/// Procedure names live as long as the process (the runtime keeps `&'static str` names): each
/// distinct name is stored once.
fn intern(name: &str) -> &'static str {
    static NAMES: Mutex<Option<HashSet<&'static str>>> = Mutex::new(None);
    let mut names = NAMES.lock().unwrap_or_else(|p| p.into_inner());
    let names = names.get_or_insert_with(HashSet::new);
    if let Some(n) = names.get(name) {
        return n;
    }
    let leaked: &'static str = Box::leak(name.to_owned().into_boxed_str());
    names.insert(leaked);
    leaked
}

/// Makes a server with no procedures and default settings; `*out` is it (NULL on failure).
///
/// # Safety
/// `out` is NULL or points to a writable pointer.
#[no_mangle]
pub unsafe extern "C" fn lowlat_server_new(out: *mut *mut lowlat_server) -> c_int {
    guard(|| {
        // SAFETY: the caller's contract, as stated above.
        let out = unsafe { out.as_mut() }.ok_or_else(|| Failure::invalid("out is NULL"))?;
        let server =
            lowlat_server { programs: Vec::new(), config: ServerConfig::default(), running: None, uris: Vec::new() };
        *out = Box::into_raw(Box::new(server));
        Ok(LOWLAT_OK.code())
    })
}

/// The server behind a handle, refusing changes while it serves.
///
/// # Safety
/// `s` is NULL or a live server used by no other thread during the call.
unsafe fn idle<'a>(s: *mut lowlat_server) -> Result<&'a mut lowlat_server, Failure> {
    // SAFETY: the caller's contract.
    let s = unsafe { ffi::handle_mut(s, "server")? };
    if s.running.is_some() {
        return Err(Failure::invalid("the server is serving: stop it before changing it"));
    }
    Ok(s)
}

/// Adds procedure `proc` (0 to 65535) named `name` to `program` `version`: `procedure` is called
/// with `user` for each call. `flags` is 0 or a combination of `LOWLAT_PROCEDURE_XDR` and
/// `LOWLAT_PROCEDURE_LONG_RUNNING`. A program and version may be added in both encodings (lowlat
/// callers get the native one, ONC RPC callers the XDR one). Replaces a procedure added before
/// with the same numbers and encoding. Fails while the server serves.
///
/// # Safety
/// `server` is NULL or a live server; `name` is NULL or a NUL-terminated string; `procedure` has
/// `lowlat_procedure`'s contract and, with `user`, may be called from any thread, several at
/// once, until the server is stopped or freed.
#[no_mangle]
pub unsafe extern "C" fn lowlat_server_add_procedure(
    server: *mut lowlat_server,
    program: u32,
    version: u32,
    proc: u32,
    name: *const c_char,
    flags: u32,
    procedure: lowlat_procedure,
    user: *mut c_void,
) -> c_int {
    guard(|| {
        // SAFETY: the caller's contract, as stated above.
        let (s, name) = unsafe { (idle(server)?, ffi::str_arg(name, "name")?) };
        let procedure = procedure.ok_or_else(|| Failure::invalid("procedure is NULL"))?;
        if proc > u32::from(u16::MAX) {
            return Err(Failure::invalid(format!("procedure number {proc} is above 65535")));
        }
        let unknown = flags & !(LOWLAT_PROCEDURE_XDR | LOWLAT_PROCEDURE_LONG_RUNNING);
        if unknown != 0 {
            return Err(Failure::invalid(format!("unknown procedure flags {unknown:#x}")));
        }
        let xdr = flags & LOWLAT_PROCEDURE_XDR != 0;
        let user = User(user);
        let handler = move |ctx: &CallContext, args: &[u8], reply: &mut OutBuf<'_>| {
            let call = lowlat_call {
                program: ctx.program,
                version: ctx.version,
                procedure: ctx.proc_no,
                client_big_endian: ctx.client_order == ByteOrder::Big,
                has_auth_sys: ctx.auth.is_some(),
                uid: ctx.auth.as_ref().map_or(0, |a| a.uid),
                gid: ctx.auth.as_ref().map_or(0, |a| a.gid),
            };
            // SAFETY: `procedure` has lowlat_procedure's contract and may be called with `user`
            // from this thread (lowlat_server_add_procedure's contract); `args` and `reply` are
            // lent for the call only.
            let status = unsafe { procedure(user.get(), &call, args.as_ptr(), args.len(), lend(reply)) };
            match status {
                LOWLAT_PROC_OK => Ok(()),
                LOWLAT_PROC_GARBAGE_ARGS => Err(ProcError::GarbageArgs),
                _ => Err(ProcError::SystemError),
            }
        };
        let i = match s
            .programs
            .iter()
            .position(|p| p.number() == program && p.version() == version && p.is_xdr() == xdr)
        {
            Some(i) => i,
            None => {
                let p = Program::new(program, version);
                s.programs.push(if xdr { p.xdr() } else { p });
                s.programs.len() - 1
            }
        };
        let p = std::mem::replace(&mut s.programs[i], Program::new(program, version));
        let name = intern(name);
        s.programs[i] = if flags & LOWLAT_PROCEDURE_LONG_RUNNING != 0 {
            p.long_running(proc, name, handler)
        } else {
            p.procedure(proc, name, handler)
        };
        Ok(LOWLAT_OK.code())
    })
}

/// Whether the server registers its ONC RPC endpoints with this machine's rpcbind, when one
/// runs (default: yes). Fails while the server serves.
///
/// # Safety
/// `server` is NULL or a live server.
#[no_mangle]
pub unsafe extern "C" fn lowlat_server_set_onc_register(server: *mut lowlat_server, register: bool) -> c_int {
    guard(|| {
        // SAFETY: the caller's contract, as stated above.
        unsafe { idle(server)? }.config.onc_register = register;
        Ok(LOWLAT_OK.code())
    })
}

/// How the serving threads wait for calls: one of the `LOWLAT_SPIN_*` modes, with `spin_us` for
/// `LOWLAT_SPIN_BUDGET` (default: adaptive). Fails while the server serves.
///
/// # Safety
/// `server` is NULL or a live server.
#[no_mangle]
pub unsafe extern "C" fn lowlat_server_set_spin(server: *mut lowlat_server, spin: c_int, spin_us: u32) -> c_int {
    guard(|| {
        // SAFETY: the caller's contract, as stated above.
        let s = unsafe { idle(server)? };
        s.config.spin = spin_policy(spin, spin_us)?;
        Ok(LOWLAT_OK.code())
    })
}

/// Starts serving every program added on each of the `n` URIs (one thread each; port 0 picks a
/// free port, see `lowlat_server_uri`). Fails, serving none, if one fails.
///
/// # Safety
/// `server` is NULL or a live server; `uris` points to `n` pointers, each NULL or a
/// NUL-terminated string.
#[no_mangle]
pub unsafe extern "C" fn lowlat_server_serve(
    server: *mut lowlat_server,
    uris: *const *const c_char,
    n: usize,
) -> c_int {
    guard(|| {
        // SAFETY: the caller's contract, as stated above.
        let s = unsafe { idle(server)? };
        if n == 0 {
            return Err(Failure::invalid("no URI to serve"));
        }
        if uris.is_null() {
            return Err(Failure::invalid("uris is NULL"));
        }
        // SAFETY: `uris` points to `n` readable pointers (the caller's contract).
        let ptrs = unsafe { std::slice::from_raw_parts(uris, n) };
        let list = ptrs
            .iter()
            .enumerate()
            // SAFETY: each pointer is NULL or a NUL-terminated string (the caller's contract).
            .map(|(i, p)| unsafe { ffi::str_arg(*p, &format!("uris[{i}]")) })
            .collect::<Result<Vec<&str>, Failure>>()?;
        let builder = s.programs.iter().cloned().fold(Server::builder().config(s.config.clone()), |b, p| b.program(p));
        let running = builder.serve(&list)?;
        s.uris = running.local_uris().into_iter().map(|u| CString::new(u).unwrap_or_default()).collect();
        s.running = Some(running);
        Ok(LOWLAT_OK.code())
    })
}

/// How many URIs the server serves (0 when it is not serving, or `server` is NULL).
///
/// # Safety
/// `server` is NULL or a live server.
#[no_mangle]
pub unsafe extern "C" fn lowlat_server_uri_count(server: *const lowlat_server) -> usize {
    let mut n = 0;
    guard(|| {
        // SAFETY: the caller's contract, as stated above.
        n = unsafe { ffi::handle(server, "server")? }.uris.len();
        Ok(LOWLAT_OK.code())
    });
    n
}

/// The `i`th URI served, with the real port where port 0 was asked for (`udp://127.0.0.1:41234`),
/// or NULL when there is none. Valid until the server is stopped or freed.
///
/// # Safety
/// `server` is NULL or a live server.
#[no_mangle]
pub unsafe extern "C" fn lowlat_server_uri(server: *const lowlat_server, i: usize) -> *const c_char {
    let mut uri = std::ptr::null();
    guard(|| {
        // SAFETY: the caller's contract, as stated above.
        let s = unsafe { ffi::handle(server, "server")? };
        uri = s.uris.get(i).map_or(std::ptr::null(), |u| u.as_ptr());
        Ok(LOWLAT_OK.code())
    });
    uri
}

/// Stops serving and waits for the serving threads to finish (calls in progress complete).
/// Nothing happens when the server is not serving. It may be served again.
///
/// # Safety
/// `server` is NULL or a live server.
#[no_mangle]
pub unsafe extern "C" fn lowlat_server_stop(server: *mut lowlat_server) -> c_int {
    guard(|| {
        // SAFETY: the caller's contract, as stated above.
        let s = unsafe { ffi::handle_mut(server, "server")? };
        if let Some(r) = s.running.take() {
            r.shutdown();
        }
        s.uris.clear();
        Ok(LOWLAT_OK.code())
    })
}

/// Stops the server if it serves, and frees it (NULL is ignored).
///
/// # Safety
/// `server` is NULL or a server from `lowlat_server_new` not freed before.
#[no_mangle]
pub unsafe extern "C" fn lowlat_server_free(server: *mut lowlat_server) {
    guard(|| {
        if !server.is_null() {
            // SAFETY: the caller gives back a server made by Box::into_raw, freed only here;
            // dropping it stops it.
            drop(unsafe { Box::from_raw(server) });
        }
        Ok(LOWLAT_OK.code())
    });
}
