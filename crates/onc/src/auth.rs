//! Credentials: AUTH_NONE and AUTH_SYS (RFC 5531 §14 and appendix A). Other flavours are parsed
//! far enough to be refused with the right status.

use crate::xdr::{put_opaque, put_u32, Reader};
use crate::Error;

/// Flavour 0: no credentials at all.
pub const AUTH_NONE: u32 = 0;
/// Flavour 1: the caller's uid, gid and groups as it states them (nothing proves them).
pub const AUTH_SYS: u32 = 1;
/// Longest credential or verifier body (RFC 5531 `opaque_auth`).
pub const MAX_AUTH_BYTES: usize = 400;
/// Longest AUTH_SYS machine name.
pub const MAX_MACHINE_NAME: usize = 255;
/// Most supplementary groups in AUTH_SYS.
pub const MAX_GIDS: usize = 16;

/// Why a server refused a credential (`auth_stat`).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum AuthStat {
    /// Accepted.
    Ok,
    /// The credential is malformed (seal broken).
    BadCred,
    /// The client must begin a new session.
    RejectedCred,
    /// The verifier is malformed (seal broken).
    BadVerf,
    /// The verifier expired or was replayed.
    RejectedVerf,
    /// The server refuses the credential for security reasons.
    TooWeak,
    /// The response verifier is bogus.
    InvalidResp,
    /// Failed for a reason not given.
    Failed,
    /// A value RFC 5531 does not define, kept as sent.
    Unknown(u32),
}

impl AuthStat {
    /// The status sent as `v` (an unknown value is kept, not refused).
    pub fn from_u32(v: u32) -> AuthStat {
        match v {
            0 => AuthStat::Ok,
            1 => AuthStat::BadCred,
            2 => AuthStat::RejectedCred,
            3 => AuthStat::BadVerf,
            4 => AuthStat::RejectedVerf,
            5 => AuthStat::TooWeak,
            6 => AuthStat::InvalidResp,
            7 => AuthStat::Failed,
            v => AuthStat::Unknown(v),
        }
    }

    /// The status as sent on the wire.
    pub fn to_u32(self) -> u32 {
        match self {
            AuthStat::Ok => 0,
            AuthStat::BadCred => 1,
            AuthStat::RejectedCred => 2,
            AuthStat::BadVerf => 3,
            AuthStat::RejectedVerf => 4,
            AuthStat::TooWeak => 5,
            AuthStat::InvalidResp => 6,
            AuthStat::Failed => 7,
            AuthStat::Unknown(v) => v,
        }
    }
}

impl std::fmt::Display for AuthStat {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            AuthStat::Ok => write!(f, "AUTH_OK"),
            AuthStat::BadCred => write!(f, "AUTH_BADCRED (bad credential)"),
            AuthStat::RejectedCred => write!(f, "AUTH_REJECTEDCRED (credential rejected)"),
            AuthStat::BadVerf => write!(f, "AUTH_BADVERF (bad verifier)"),
            AuthStat::RejectedVerf => write!(f, "AUTH_REJECTEDVERF (verifier rejected)"),
            AuthStat::TooWeak => write!(f, "AUTH_TOOWEAK (credential refused for security reasons)"),
            AuthStat::InvalidResp => write!(f, "AUTH_INVALIDRESP (bogus response verifier)"),
            AuthStat::Failed => write!(f, "AUTH_FAILED (reason unknown)"),
            AuthStat::Unknown(v) => write!(f, "auth_stat {v}"),
        }
    }
}

/// AUTH_SYS credentials (`authsys_parms`), fixed-size so that holding one never allocates.
#[derive(Clone, Copy, PartialEq, Eq)]
pub struct AuthSys {
    /// Arbitrary id the caller chose (by convention the time it made the credential, in seconds).
    pub stamp: u32,
    machine: [u8; MAX_MACHINE_NAME],
    machine_len: u8,
    /// The caller's user id.
    pub uid: u32,
    /// The caller's primary group id.
    pub gid: u32,
    gids: [u32; MAX_GIDS],
    ngids: u8,
}

impl std::fmt::Debug for AuthSys {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("AuthSys")
            .field("stamp", &self.stamp)
            .field("machine", &String::from_utf8_lossy(self.machine_name()))
            .field("uid", &self.uid)
            .field("gid", &self.gid)
            .field("gids", &self.gids())
            .finish()
    }
}

impl AuthSys {
    /// Credentials for `uid`/`gid` on `machine` (truncated to 255 bytes) with up to 16 groups.
    pub fn new(stamp: u32, machine: &[u8], uid: u32, gid: u32, gids: &[u32]) -> AuthSys {
        let mut a =
            AuthSys { stamp, machine: [0; MAX_MACHINE_NAME], machine_len: 0, uid, gid, gids: [0; MAX_GIDS], ngids: 0 };
        let m = &machine[..machine.len().min(MAX_MACHINE_NAME)];
        a.machine[..m.len()].copy_from_slice(m);
        a.machine_len = m.len() as u8;
        let g = &gids[..gids.len().min(MAX_GIDS)];
        a.gids[..g.len()].copy_from_slice(g);
        a.ngids = g.len() as u8;
        a
    }

    /// This process's credentials (real uid and gid, supplementary groups, host name).
    pub fn current() -> AuthSys {
        let host = std::fs::read("/proc/sys/kernel/hostname").unwrap_or_default();
        let host = host.strip_suffix(b"\n").unwrap_or(&host);
        let (uid, gid) = ids_of_self();
        let stamp =
            std::time::SystemTime::now().duration_since(std::time::UNIX_EPOCH).map_or(0, |d| d.as_secs() as u32);
        AuthSys::new(stamp, host, uid, gid, &[gid])
    }

    /// The caller's machine name, as sent (at most 255 bytes, not necessarily UTF-8).
    pub fn machine_name(&self) -> &[u8] {
        &self.machine[..self.machine_len as usize]
    }

    /// The caller's supplementary groups (at most 16).
    pub fn gids(&self) -> &[u32] {
        &self.gids[..self.ngids as usize]
    }

    fn parse(xid: u32, body: &[u8]) -> Result<AuthSys, Error> {
        let bad = |reason: String| Error::BadCredential { xid, flavor: "AUTH_SYS", reason };
        let mut r = Reader::new(body);
        let stamp = r.u32("stamp").map_err(|e| bad(e.to_string()))?;
        let machine = r.opaque("machinename", MAX_MACHINE_NAME).map_err(|e| bad(e.to_string()))?;
        let uid = r.u32("uid").map_err(|e| bad(e.to_string()))?;
        let gid = r.u32("gid").map_err(|e| bad(e.to_string()))?;
        let n = r.u32("gids count").map_err(|e| bad(e.to_string()))? as usize;
        if n > MAX_GIDS {
            return Err(bad(format!("{n} groups, more than {MAX_GIDS}")));
        }
        let mut gids = [0u32; MAX_GIDS];
        for g in gids.iter_mut().take(n) {
            *g = r.u32("gid").map_err(|e| bad(e.to_string()))?;
        }
        if !r.is_empty() {
            return Err(bad(format!("{} bytes after the last group", r.rest().len())));
        }
        Ok(AuthSys::new(stamp, machine, uid, gid, &gids[..n]))
    }

    fn encode_body(&self, b: &mut Vec<u8>) {
        put_u32(b, self.stamp);
        put_opaque(b, self.machine_name());
        put_u32(b, self.uid);
        put_u32(b, self.gid);
        put_u32(b, self.ngids as u32);
        for g in self.gids() {
            put_u32(b, *g);
        }
    }
}

fn ids_of_self() -> (u32, u32) {
    // /proc/self/status: "Uid:\treal\teffective..." — no libc needed.
    let s = std::fs::read_to_string("/proc/self/status").unwrap_or_default();
    let field = |name: &str| {
        s.lines()
            .find_map(|l| l.strip_prefix(name))
            .and_then(|v| v.split_whitespace().next())
            .and_then(|v| v.parse().ok())
            .unwrap_or(65534)
    };
    (field("Uid:"), field("Gid:"))
}

/// A call's credential where it lies in the message, checked when the call was parsed and read
/// into an [`AuthSys`] only when asked: an `AuthSys` is some 340 bytes (fixed-size, so holding
/// one never allocates), and a call moved by value from the parser through a server's engine
/// to its dispatcher copied them at each step (seven copies, some 410 instructions of a null
/// call's 1,948 on the server).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum CredentialIn<'a> {
    /// AUTH_NONE.
    None,
    /// AUTH_SYS: the body of the credential (`authsys_parms`), already checked.
    Sys(&'a [u8]),
}

impl CredentialIn<'_> {
    /// The AUTH_SYS credentials, when the caller sent some.
    pub fn auth_sys(&self) -> Option<AuthSys> {
        match self {
            CredentialIn::None => None,
            // Checked by `Credential::parse`: it parses again the same way.
            CredentialIn::Sys(body) => AuthSys::parse(0, body).ok(),
        }
    }

    /// The credential, read.
    pub fn credential(&self) -> Credential {
        self.auth_sys().map_or(Credential::None, Credential::Sys)
    }
}

/// A call's credential.
// Fixed-size on purpose: a server hands it to a procedure without allocating.
#[allow(clippy::large_enum_variant)]
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Credential {
    /// AUTH_NONE.
    None,
    /// AUTH_SYS, with the credentials it states.
    Sys(AuthSys),
}

impl Credential {
    /// Appends the credential and an AUTH_NONE verifier.
    pub fn encode(&self, b: &mut Vec<u8>) {
        match self {
            Credential::None => {
                put_u32(b, AUTH_NONE);
                put_u32(b, 0);
            }
            Credential::Sys(a) => {
                put_u32(b, AUTH_SYS);
                let len_at = b.len();
                put_u32(b, 0);
                a.encode_body(b);
                let n = (b.len() - len_at - 4) as u32;
                b[len_at..len_at + 4].copy_from_slice(&n.to_be_bytes());
            }
        }
        put_u32(b, AUTH_NONE);
        put_u32(b, 0);
    }

    /// Reads a credential and its verifier. Verifiers are accepted only as AUTH_NONE, as for
    /// AUTH_SYS they carry nothing.
    pub(crate) fn parse<'a>(xid: u32, r: &mut Reader<'a>) -> Result<CredentialIn<'a>, Error> {
        let flavor = r.u32("credential flavor")?;
        let body = r.opaque("credential", MAX_AUTH_BYTES).map_err(|e| match e {
            Error::TooLong { len, max, .. } => {
                Error::BadCredential { xid, flavor: "any", reason: format!("{len} bytes, more than {max}") }
            }
            e => e,
        })?;
        let cred = match flavor {
            AUTH_NONE if body.is_empty() => CredentialIn::None,
            AUTH_NONE => {
                return Err(Error::BadCredential {
                    xid,
                    flavor: "AUTH_NONE",
                    reason: format!("{} bytes of body, expected none", body.len()),
                })
            }
            AUTH_SYS => {
                AuthSys::parse(xid, body)?;
                CredentialIn::Sys(body)
            }
            f => return Err(Error::UnsupportedFlavor { xid, flavor: f, part: "credential" }),
        };
        let vflavor = r.u32("verifier flavor")?;
        r.opaque("verifier", MAX_AUTH_BYTES)?;
        if vflavor != AUTH_NONE {
            return Err(Error::UnsupportedFlavor { xid, flavor: vflavor, part: "verifier" });
        }
        Ok(cred)
    }
}
