//! The built-in `lab` interface: the procedures of the source papers' experiments.
//!
//! Program 0x20004C4C ("LL" in the ONC RPC user range), version 1:
//!
//! | number | procedure | arguments | result |
//! |---|---|---|---|
//! | 0 | `NULL` | none | none |
//! | 1 | `MINUS` | `int a, int b` | `int a - b` |
//! | 2 | `MAXARG` | `opaque buf<>` | none |
//! | 3 | `MAXRESULT` | `unsigned n` | `opaque<n>` (n bytes) |
//! | 4 | `ECHO` | `opaque buf<>` | `opaque<>` (the same bytes) |
//!
//! Bodies are in the server's byte order. A single opaque argument or result is the whole body
//! (its length is the body's length), so `MAXARG(1440)` puts exactly 1440 bytes on the wire.
//! Over ONC RPC (`onc+udp://`, `onc+tcp://`) bodies are XDR instead ([`program_xdr`]); the
//! [`LabClient`] picks the encoding from the URI.

use lowlat::{Client, ClientConfig, DecodeError, Error, ProcError, Program};

pub const PROGRAM: u32 = 0x2000_4C4C;
pub const VERSION: u32 = 1;

pub const NULL: u32 = 0;
pub const MINUS: u32 = 1;
pub const MAXARG: u32 = 2;
pub const MAXRESULT: u32 = 3;
pub const ECHO: u32 = 4;

/// Procedure names by number, as the command line accepts them.
pub const PROCEDURES: [(&str, u32); 5] =
    [("null", NULL), ("minus", MINUS), ("maxarg", MAXARG), ("maxresult", MAXRESULT), ("echo", ECHO)];

/// The procedure number for a name (case-insensitive) or a number.
pub fn procedure_number(name: &str) -> Option<u32> {
    let lower = name.to_ascii_lowercase();
    PROCEDURES.iter().find(|(n, _)| *n == lower).map(|(_, p)| *p).or_else(|| name.parse().ok())
}

/// The byte that `MAXRESULT` puts at offset `i`.
pub fn maxresult_byte(i: usize) -> u8 {
    (i % 251) as u8
}

/// Appends `n` bytes of the `MAXRESULT` pattern, a chunk at a time.
fn append_pattern(out: &mut Vec<u8>, n: usize) {
    // A whole number of periods, so every chunk starts at a period boundary.
    static PATTERN: std::sync::OnceLock<Vec<u8>> = std::sync::OnceLock::new();
    let p = PATTERN.get_or_init(|| (0..251 * 261).map(maxresult_byte).collect());
    let mut left = n;
    while left > 0 {
        let k = left.min(p.len());
        out.extend_from_slice(&p[..k]);
        left -= k;
    }
}

fn none(_: &mut Vec<u8>) -> Result<(), DecodeError> {
    Ok(())
}

fn empty(r: &[u8]) -> Result<(), DecodeError> {
    if r.is_empty() {
        Ok(())
    } else {
        Err(DecodeError::new("an empty result", r.len()))
    }
}

/// Appends XDR `opaque<>`: a big-endian length, the bytes, zero padding to four.
fn put_xdr_opaque(buf: &mut Vec<u8>, data: &[u8]) {
    buf.extend_from_slice(&(data.len() as u32).to_be_bytes());
    buf.extend_from_slice(data);
    buf.resize(buf.len() + (4 - data.len() % 4) % 4, 0);
}

/// Reads a whole body that is one XDR `opaque<>`.
fn xdr_opaque(r: &[u8]) -> Result<&[u8], DecodeError> {
    let n = r.get(..4).map(|b| u32::from_be_bytes([b[0], b[1], b[2], b[3]]) as usize);
    match n {
        Some(n) if r.len() == 4 + n + (4 - n % 4) % 4 => Ok(&r[4..4 + n]),
        _ => Err(DecodeError::new("an XDR opaque<>", r.len())),
    }
}

/// A client of the lab interface.
#[derive(Debug)]
pub struct LabClient {
    client: Client,
    /// ONC RPC binding: bodies are XDR.
    xdr: bool,
}

impl LabClient {
    pub fn connect(uri: &str, cfg: ClientConfig) -> Result<LabClient, Error> {
        let client = Client::connect_with(uri, PROGRAM, VERSION, cfg)?;
        let xdr = client.is_onc();
        Ok(LabClient { client, xdr })
    }

    pub fn client(&self) -> &Client {
        &self.client
    }

    pub fn null(&self) -> Result<(), Error> {
        self.client.call(NULL, none, empty)
    }

    pub fn minus(&self, a: i32, b: i32) -> Result<i32, Error> {
        // XDR integers are big-endian, like a big-endian server's native ones.
        let big = self.xdr || self.client.server_byte_order() == lowlat::ByteOrder::Big;
        let enc = |v: i32| if big { v.to_be_bytes() } else { v.to_le_bytes() };
        self.client.call::<_, DecodeError>(
            MINUS,
            |buf| {
                buf.extend_from_slice(&enc(a));
                buf.extend_from_slice(&enc(b));
                Ok(())
            },
            |r| {
                let b: [u8; 4] = r.try_into().map_err(|_| DecodeError::new("a 4-byte int", r.len()))?;
                Ok(if big { i32::from_be_bytes(b) } else { i32::from_le_bytes(b) })
            },
        )
    }

    pub fn maxarg(&self, data: &[u8]) -> Result<(), Error> {
        self.client.call::<_, DecodeError>(
            MAXARG,
            |buf| {
                if self.xdr {
                    put_xdr_opaque(buf, data);
                } else {
                    buf.extend_from_slice(data);
                }
                Ok(())
            },
            empty,
        )
    }

    /// Asks for `n` bytes; they are copied into `out` (whose capacity is reused).
    pub fn maxresult(&self, n: u32, out: &mut Vec<u8>) -> Result<(), Error> {
        let big = self.xdr || self.client.server_byte_order() == lowlat::ByteOrder::Big;
        self.client.call(
            MAXRESULT,
            |buf| {
                buf.extend_from_slice(&if big { n.to_be_bytes() } else { n.to_le_bytes() });
                Ok(())
            },
            |r| {
                let r = if self.xdr { xdr_opaque(r)? } else { r };
                if r.len() != n as usize {
                    return Err(DecodeError::new("as many bytes as asked for", r.len()));
                }
                out.clear();
                out.extend_from_slice(r);
                Ok(())
            },
        )
    }

    /// Sends `data` and receives it back into `out`.
    pub fn echo(&self, data: &[u8], out: &mut Vec<u8>) -> Result<(), Error> {
        self.client.call::<_, DecodeError>(
            ECHO,
            |buf| {
                if self.xdr {
                    put_xdr_opaque(buf, data);
                } else {
                    buf.extend_from_slice(data);
                }
                Ok(())
            },
            |r| {
                let r = if self.xdr { xdr_opaque(r)? } else { r };
                out.clear();
                out.extend_from_slice(r);
                Ok(())
            },
        )
    }
}

/// The server side of the lab interface.
pub fn program() -> Program {
    Program::new(PROGRAM, VERSION)
        .procedure(NULL, "NULL", |_, args, _| if args.is_empty() { Ok(()) } else { Err(ProcError::GarbageArgs) })
        .procedure(MINUS, "MINUS", |_, args, reply| {
            if args.len() != 8 {
                return Err(ProcError::GarbageArgs);
            }
            let a = i32::from_ne_bytes(args[0..4].try_into().map_err(|_| ProcError::GarbageArgs)?);
            let b = i32::from_ne_bytes(args[4..8].try_into().map_err(|_| ProcError::GarbageArgs)?);
            reply.extend_from_slice(&a.wrapping_sub(b).to_ne_bytes());
            Ok(())
        })
        .procedure(MAXARG, "MAXARG", |_, _, _| Ok(()))
        .procedure(MAXRESULT, "MAXRESULT", |_, args, reply| {
            let n: [u8; 4] = args.try_into().map_err(|_| ProcError::GarbageArgs)?;
            let n = u32::from_ne_bytes(n) as usize;
            // Larger than any session allows: the engine answers TooLarge; don't build it.
            if n > 1 << 30 {
                return Err(ProcError::GarbageArgs);
            }
            append_pattern(reply, n);
            Ok(())
        })
        .procedure(ECHO, "ECHO", |_, args, reply| {
            reply.extend_from_slice(args);
            Ok(())
        })
}

/// The lab interface with XDR bodies, as ONC RPC callers (rpcgen clients of `idl/lab.x`, and
/// [`LabClient`] over `onc+udp://` or `onc+tcp://`) send them: `MINUS`'s integers big-endian,
/// opaque data with a four-byte big-endian length and padding.
pub fn program_xdr() -> Program {
    let garbage = |_| ProcError::GarbageArgs;
    Program::new(PROGRAM, VERSION)
        .xdr()
        .procedure(NULL, "NULL", |_, args, _| if args.is_empty() { Ok(()) } else { Err(ProcError::GarbageArgs) })
        .procedure(MINUS, "MINUS", |_, args, reply| {
            if args.len() != 8 {
                return Err(ProcError::GarbageArgs);
            }
            let a = i32::from_be_bytes([args[0], args[1], args[2], args[3]]);
            let b = i32::from_be_bytes([args[4], args[5], args[6], args[7]]);
            reply.extend_from_slice(&a.wrapping_sub(b).to_be_bytes());
            Ok(())
        })
        .procedure(MAXARG, "MAXARG", move |_, args, _| xdr_opaque(args).map(|_| ()).map_err(garbage))
        .procedure(MAXRESULT, "MAXRESULT", |_, args, reply| {
            let n: [u8; 4] = args.try_into().map_err(|_| ProcError::GarbageArgs)?;
            let n = u32::from_be_bytes(n) as usize;
            // More than any datagram or record carries: refuse rather than build it.
            if n > 1 << 30 {
                return Err(ProcError::GarbageArgs);
            }
            reply.extend_from_slice(&(n as u32).to_be_bytes());
            append_pattern(reply, n);
            reply.resize(reply.len() + (4 - n % 4) % 4, 0);
            Ok(())
        })
        .procedure(ECHO, "ECHO", move |_, args, reply| {
            xdr_opaque(args).map_err(garbage)?;
            // The argument is already the XDR encoding of the result.
            reply.extend_from_slice(args);
            Ok(())
        })
}
