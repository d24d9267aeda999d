//! Call and reply messages (RFC 5531 §9). Parsing borrows from the caller's buffer and never
//! panics; writing appends to a caller-owned `Vec<u8>`, so a server reuses one buffer for every
//! reply.

use crate::auth::{AuthStat, Credential, CredentialIn, AUTH_NONE};
use crate::xdr::{put_u32, Reader};
use crate::{Error, RPC_VERSION};

const CALL: u32 = 0;
const REPLY: u32 = 1;
const MSG_ACCEPTED: u32 = 0;
const MSG_DENIED: u32 = 1;

/// The fixed part of a call.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct CallHeader {
    /// Transaction id: the caller's choice, echoed by the reply; a retransmission keeps it.
    pub xid: u32,
    /// The program number called.
    pub program: u32,
    /// The version of that program.
    pub version: u32,
    /// The procedure number within that version.
    pub procedure: u32,
}

impl CallHeader {
    /// Appends the call header with `cred` (the arguments follow).
    pub fn encode(&self, cred: &Credential, b: &mut Vec<u8>) {
        put_u32(b, self.xid);
        put_u32(b, CALL);
        put_u32(b, RPC_VERSION);
        put_u32(b, self.program);
        put_u32(b, self.version);
        put_u32(b, self.procedure);
        cred.encode(b);
    }

    /// How many bytes a call header with `cred` takes before the arguments.
    pub fn encoded_len(cred: &Credential) -> usize {
        let mut b = Vec::with_capacity(64);
        CallHeader { xid: 0, program: 0, version: 0, procedure: 0 }.encode(cred, &mut b);
        b.len()
    }
}

/// A parsed call: header, credential and the arguments, which stay where they lie.
#[derive(Clone, Copy, Debug)]
pub struct Call<'a> {
    /// xid, program, version and procedure.
    pub header: CallHeader,
    /// The caller's credential, where it lies (its verifier, AUTH_NONE, is checked and
    /// dropped).
    pub cred: CredentialIn<'a>,
    /// The XDR-encoded arguments: the rest of the message, unvalidated.
    pub args: &'a [u8],
}

impl<'a> Call<'a> {
    /// Parses a call. Errors with an [`Error::xid`] deserve a denial (RPC_MISMATCH or
    /// AUTH_ERROR, see [`RejectStatus::for_error`]); the others are dropped.
    pub fn parse(msg: &'a [u8]) -> Result<Call<'a>, Error> {
        let mut r = Reader::new(msg);
        let xid = r.u32("xid")?;
        match r.u32("message type")? {
            CALL => {}
            REPLY => return Err(Error::UnexpectedType { expected: "CALL" }),
            t => return Err(Error::BadMessageType(t)),
        }
        let rpcvers = r.u32("rpcvers")?;
        if rpcvers != RPC_VERSION {
            return Err(Error::RpcVersion { xid, got: rpcvers });
        }
        let program = r.u32("program")?;
        let version = r.u32("version")?;
        let procedure = r.u32("procedure")?;
        let cred = Credential::parse(xid, &mut r)?;
        Ok(Call { header: CallHeader { xid, program, version, procedure }, cred, args: r.rest() })
    }
}

/// `accept_stat` with its data.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum AcceptStatus {
    /// The procedure ran; its results follow.
    Success,
    /// The server does not serve the program.
    ProgUnavail,
    /// The server serves the program, but not the version asked for.
    ProgMismatch {
        /// Lowest version served.
        low: u32,
        /// Highest version served.
        high: u32,
    },
    /// The version has no such procedure.
    ProcUnavail,
    /// The arguments could not be decoded.
    GarbageArgs,
    /// The server failed (out of memory, a result too large to send, a procedure's error).
    SystemErr,
}

/// `reject_stat` with its data.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum RejectStatus {
    /// The call's RPC version is not served.
    RpcMismatch {
        /// Lowest RPC version served.
        low: u32,
        /// Highest RPC version served.
        high: u32,
    },
    /// The credential or verifier was refused, for this reason.
    AuthError(AuthStat),
}

impl RejectStatus {
    /// The denial a server owes a call that failed to parse with `e`, if any.
    pub fn for_error(e: &Error) -> Option<(u32, RejectStatus)> {
        match e {
            Error::RpcVersion { xid, .. } => {
                Some((*xid, RejectStatus::RpcMismatch { low: RPC_VERSION, high: RPC_VERSION }))
            }
            Error::BadCredential { xid, .. } => Some((*xid, RejectStatus::AuthError(AuthStat::BadCred))),
            Error::UnsupportedFlavor { xid, part: "verifier", .. } => {
                Some((*xid, RejectStatus::AuthError(AuthStat::BadVerf)))
            }
            // libtirpc answers an unknown flavour with AUTH_REJECTEDCRED; so do we.
            Error::UnsupportedFlavor { xid, .. } => Some((*xid, RejectStatus::AuthError(AuthStat::RejectedCred))),
            _ => None,
        }
    }
}

/// A reply's status.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum ReplyBody {
    /// `MSG_ACCEPTED`: the call passed authentication; the status says what came of it.
    Accepted(AcceptStatus),
    /// `MSG_DENIED`: the call was refused before any procedure was looked up.
    Denied(RejectStatus),
}

/// A parsed reply: xid, status and, on success, the results where they lie.
#[derive(Clone, Copy, Debug)]
pub struct Reply<'a> {
    /// The xid of the call answered.
    pub xid: u32,
    /// Accepted or denied, and how.
    pub body: ReplyBody,
    /// The bytes after the status: the XDR-encoded results after SUCCESS (unvalidated).
    pub results: &'a [u8],
}

/// Appends an accepted reply header (with an AUTH_NONE verifier); results follow for SUCCESS.
pub fn encode_accepted(xid: u32, status: AcceptStatus, b: &mut Vec<u8>) {
    put_u32(b, xid);
    put_u32(b, REPLY);
    put_u32(b, MSG_ACCEPTED);
    put_u32(b, AUTH_NONE);
    put_u32(b, 0);
    match status {
        AcceptStatus::Success => put_u32(b, 0),
        AcceptStatus::ProgUnavail => put_u32(b, 1),
        AcceptStatus::ProgMismatch { low, high } => {
            put_u32(b, 2);
            put_u32(b, low);
            put_u32(b, high);
        }
        AcceptStatus::ProcUnavail => put_u32(b, 3),
        AcceptStatus::GarbageArgs => put_u32(b, 4),
        AcceptStatus::SystemErr => put_u32(b, 5),
    }
}

/// Appends a denied reply.
pub fn encode_denied(xid: u32, status: RejectStatus, b: &mut Vec<u8>) {
    put_u32(b, xid);
    put_u32(b, REPLY);
    put_u32(b, MSG_DENIED);
    match status {
        RejectStatus::RpcMismatch { low, high } => {
            put_u32(b, 0);
            put_u32(b, low);
            put_u32(b, high);
        }
        RejectStatus::AuthError(s) => {
            put_u32(b, 1);
            put_u32(b, s.to_u32());
        }
    }
}

/// Appends any reply header.
pub fn encode_reply(xid: u32, body: ReplyBody, b: &mut Vec<u8>) {
    match body {
        ReplyBody::Accepted(s) => encode_accepted(xid, s, b),
        ReplyBody::Denied(s) => encode_denied(xid, s, b),
    }
}

/// Reads just the xid and message type (to match replies before parsing them).
pub fn peek_xid(msg: &[u8]) -> Option<u32> {
    msg.get(..4).map(|b| u32::from_be_bytes([b[0], b[1], b[2], b[3]]))
}

impl<'a> Reply<'a> {
    /// Parses a reply; a call, an unknown status or a truncated message is an error.
    pub fn parse(msg: &'a [u8]) -> Result<Reply<'a>, Error> {
        let mut r = Reader::new(msg);
        let xid = r.u32("xid")?;
        match r.u32("message type")? {
            REPLY => {}
            CALL => return Err(Error::UnexpectedType { expected: "REPLY" }),
            t => return Err(Error::BadMessageType(t)),
        }
        let body = match r.u32("reply_stat")? {
            MSG_ACCEPTED => {
                let _flavor = r.u32("verifier flavor")?;
                r.opaque("verifier", crate::auth::MAX_AUTH_BYTES)?;
                ReplyBody::Accepted(match r.u32("accept_stat")? {
                    0 => AcceptStatus::Success,
                    1 => AcceptStatus::ProgUnavail,
                    2 => AcceptStatus::ProgMismatch { low: r.u32("low version")?, high: r.u32("high version")? },
                    3 => AcceptStatus::ProcUnavail,
                    4 => AcceptStatus::GarbageArgs,
                    5 => AcceptStatus::SystemErr,
                    v => return Err(Error::UnknownStatus { what: "accept_stat", value: v }),
                })
            }
            MSG_DENIED => ReplyBody::Denied(match r.u32("reject_stat")? {
                0 => RejectStatus::RpcMismatch { low: r.u32("low version")?, high: r.u32("high version")? },
                1 => RejectStatus::AuthError(AuthStat::from_u32(r.u32("auth_stat")?)),
                v => return Err(Error::UnknownStatus { what: "reject_stat", value: v }),
            }),
            v => return Err(Error::UnknownStatus { what: "reply_stat", value: v }),
        };
        Ok(Reply { xid, body, results: r.rest() })
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::auth::AuthSys;

    #[test]
    fn call_round_trips_with_each_credential() {
        let sys = AuthSys::new(7, b"host", 1000, 100, &[100, 27]);
        for cred in [Credential::None, Credential::Sys(sys)] {
            let h = CallHeader { xid: 9, program: 0x2000_0001, version: 3, procedure: 4 };
            let mut b = Vec::new();
            h.encode(&cred, &mut b);
            b.extend_from_slice(&[0, 0, 0, 5]);
            let c = Call::parse(&b).unwrap();
            assert_eq!(CallHeader::encoded_len(&cred), b.len() - 4);
            assert_eq!(c.header, h);
            assert_eq!(c.cred.credential(), cred);
            assert_eq!(c.args, &[0, 0, 0, 5]);
        }
    }

    #[test]
    fn null_call_bytes_match_rfc_layout() {
        let mut b = Vec::new();
        CallHeader { xid: 1, program: 100000, version: 2, procedure: 0 }.encode(&Credential::None, &mut b);
        let words: Vec<u32> = b.chunks(4).map(|c| u32::from_be_bytes(c.try_into().unwrap())).collect();
        assert_eq!(words, [1, 0, 2, 100000, 2, 0, 0, 0, 0, 0]);
    }

    #[test]
    fn every_reply_status_round_trips() {
        let bodies = [
            ReplyBody::Accepted(AcceptStatus::Success),
            ReplyBody::Accepted(AcceptStatus::ProgUnavail),
            ReplyBody::Accepted(AcceptStatus::ProgMismatch { low: 1, high: 3 }),
            ReplyBody::Accepted(AcceptStatus::ProcUnavail),
            ReplyBody::Accepted(AcceptStatus::GarbageArgs),
            ReplyBody::Accepted(AcceptStatus::SystemErr),
            ReplyBody::Denied(RejectStatus::RpcMismatch { low: 2, high: 2 }),
            ReplyBody::Denied(RejectStatus::AuthError(AuthStat::TooWeak)),
            ReplyBody::Denied(RejectStatus::AuthError(AuthStat::Unknown(99))),
        ];
        for body in bodies {
            let mut b = Vec::new();
            encode_reply(42, body, &mut b);
            b.extend_from_slice(b"abcd");
            let r = Reply::parse(&b).unwrap();
            assert_eq!((r.xid, r.body), (42, body));
            if body == ReplyBody::Accepted(AcceptStatus::Success) {
                assert_eq!(r.results, b"abcd");
            }
        }
    }

    #[test]
    fn bad_calls_get_the_right_denial() {
        let mut b = Vec::new();
        CallHeader { xid: 5, program: 1, version: 1, procedure: 0 }.encode(&Credential::None, &mut b);
        let mut v3 = b.clone();
        v3[8..12].copy_from_slice(&3u32.to_be_bytes());
        let e = Call::parse(&v3).unwrap_err();
        assert_eq!(RejectStatus::for_error(&e), Some((5, RejectStatus::RpcMismatch { low: 2, high: 2 })));
        let mut des = b.clone();
        des[24..28].copy_from_slice(&3u32.to_be_bytes()); // AUTH_DES
        let e = Call::parse(&des).unwrap_err();
        assert_eq!(RejectStatus::for_error(&e), Some((5, RejectStatus::AuthError(AuthStat::RejectedCred))));
        let mut sys_empty = b.clone();
        sys_empty[24..28].copy_from_slice(&1u32.to_be_bytes());
        let e = Call::parse(&sys_empty).unwrap_err();
        assert_eq!(RejectStatus::for_error(&e), Some((5, RejectStatus::AuthError(AuthStat::BadCred))));
        let mut verf = b.clone();
        verf[32..36].copy_from_slice(&6u32.to_be_bytes());
        let e = Call::parse(&verf).unwrap_err();
        assert_eq!(RejectStatus::for_error(&e), Some((5, RejectStatus::AuthError(AuthStat::BadVerf))));
    }

    #[test]
    fn every_truncation_is_an_error_not_a_panic() {
        let mut b = Vec::new();
        let sys = AuthSys::new(1, b"machine", 1, 2, &[3, 4, 5]);
        CallHeader { xid: 5, program: 1, version: 1, procedure: 0 }.encode(&Credential::Sys(sys), &mut b);
        for n in 0..b.len() {
            assert!(Call::parse(&b[..n]).is_err(), "prefix of {n} bytes parsed");
        }
        let mut r = Vec::new();
        encode_accepted(1, AcceptStatus::ProgMismatch { low: 1, high: 2 }, &mut r);
        for n in 0..r.len() {
            assert!(Reply::parse(&r[..n]).is_err(), "reply prefix of {n} bytes parsed");
        }
        // A huge length must not be trusted.
        let mut huge = b[..28].to_vec();
        huge.extend_from_slice(&u32::MAX.to_be_bytes());
        assert!(Call::parse(&huge).is_err());
    }
}
