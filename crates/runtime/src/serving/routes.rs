//! Where a call goes: the programs of one server ([`Services`]), a procedure's route (inline,
//! worker pool, async), and the cache that finds a session's program by two indexings.

use lowlat_proto::{CallKey, ProgramVersions};

use crate::program::{AsyncHandler, Body, Procedure, Program};

/// The programs of one server, looked up per call.
#[derive(Clone, Debug, Default)]
pub(crate) struct Services {
    programs: Vec<Program>,
    /// The next [`Procedure::id`] to give.
    next_id: usize,
}

/// A procedure as the server's metrics name it.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct ProcedureName {
    /// The program's number.
    pub program: u32,
    /// The program's version.
    pub version: u32,
    /// The procedure's number.
    pub number: u32,
    /// Its name in the interface definition.
    pub name: String,
    /// Its bodies are XDR (served over ONC RPC).
    pub xdr: bool,
}

/// Where a call goes.
pub(crate) enum Route<'a> {
    Inline(&'a Procedure),
    Worker(&'a Procedure),
    /// An async procedure (with its body): its future, polled on the receiving thread
    /// (`super::async_calls`).
    Async(&'a Procedure, &'a AsyncHandler),
    Missing,
}

impl Route<'_> {
    /// The name of the procedure the call goes to, when there is one.
    pub fn name(&self) -> Option<&'static str> {
        match self {
            Route::Inline(p) | Route::Worker(p) | Route::Async(p, _) => Some(p.name),
            Route::Missing => None,
        }
    }

    /// The [`Procedure::id`] of the procedure the call goes to (`UNTIMED` when none).
    #[inline]
    pub fn id(&self) -> usize {
        match self {
            Route::Inline(p) | Route::Worker(p) | Route::Async(p, _) => p.id,
            Route::Missing => crate::program::UNTIMED,
        }
    }
}

impl Services {
    pub fn add(&mut self, mut p: Program) {
        self.programs.retain(|q| !(q.program == p.program && q.version == p.version && q.xdr == p.xdr));
        for proc in p.procs.iter_mut().flatten() {
            proc.id = self.next_id;
            self.next_id += 1;
        }
        self.programs.push(p);
    }

    /// How many procedure ids have been given (an upper bound of every [`Procedure::id`]).
    pub fn procedure_count(&self) -> usize {
        self.next_id
    }

    /// Every procedure served, by id.
    pub fn procedure_names(&self) -> Vec<(usize, ProcedureName)> {
        let mut out = Vec::new();
        for p in &self.programs {
            for (number, proc) in p.procs.iter().enumerate() {
                if let Some(proc) = proc {
                    let name = ProcedureName {
                        program: p.program,
                        version: p.version,
                        number: number as u32,
                        name: proc.name.to_string(),
                        xdr: p.xdr,
                    };
                    out.push((proc.id, name));
                }
            }
        }
        out
    }

    /// Programs with their version ranges, for the binding handshake.
    pub fn versions(&self) -> Vec<ProgramVersions> {
        let mut out: Vec<ProgramVersions> = Vec::new();
        for p in &self.programs {
            match out.iter_mut().find(|v| v.program == p.program) {
                Some(v) => {
                    v.low = v.low.min(p.version);
                    v.high = v.high.max(p.version);
                }
                None => out.push(ProgramVersions { program: p.program, low: p.version, high: p.version }),
            }
        }
        out
    }

    /// Which of the programs serves `program`, `version` over lowlat's protocol: a native one
    /// before an XDR one.
    fn program_index(&self, program: u32, version: u32) -> Option<usize> {
        let serves = |p: &Program| p.program == program && p.version == version;
        self.programs.iter().position(|p| serves(p) && !p.xdr).or_else(|| self.programs.iter().position(serves))
    }

    /// The XDR programs, served over ONC RPC.
    pub fn xdr_programs(&self) -> impl Iterator<Item = &Program> {
        self.programs.iter().filter(|p| p.xdr)
    }

    /// Where an ONC RPC call goes (XDR programs only).
    pub fn xdr_route(&self, program: u32, version: u32, proc_no: u32) -> Route<'_> {
        match self.xdr_programs().find(|p| p.program == program && p.version == version) {
            Some(p) => Self::route_in(p, proc_no),
            None => Route::Missing,
        }
    }

    fn route_in(p: &Program, proc_no: u32) -> Route<'_> {
        match p.procs.get(proc_no as usize) {
            // Async procedures block nothing, so they need no worker.
            Some(Some(pr @ Procedure { body: Body::Async(h), .. })) => Route::Async(pr, &**h),
            Some(Some(pr)) if pr.long_running => Route::Worker(pr),
            Some(Some(pr)) => Route::Inline(pr),
            _ => Route::Missing,
        }
    }
}

/// Which program serves each session, so that a call finds its procedure by two indexings
/// (session, procedure) instead of a search of the programs: a session's program and version
/// are fixed at bind time. Grows (allocates) only when a session of a higher index first calls.
#[derive(Default)]
pub(crate) struct RouteCache {
    /// Per session index: the token it belongs to (0: none; a token is never 0) and the program.
    by_session: Vec<(u64, usize)>,
}

impl RouteCache {
    #[inline]
    pub fn route<'s>(
        &mut self,
        services: &'s Services,
        key: CallKey,
        program: u32,
        version: u32,
        proc_no: u32,
    ) -> Route<'s> {
        match self.by_session.get(key.session()) {
            Some(&(token, i)) if token == key.token => Services::route_in(&services.programs[i], proc_no),
            _ => self.learn(services, key, program, version, proc_no),
        }
    }

    #[cold]
    fn learn<'s>(
        &mut self,
        services: &'s Services,
        key: CallKey,
        program: u32,
        version: u32,
        proc_no: u32,
    ) -> Route<'s> {
        let Some(i) = services.program_index(program, version) else { return Route::Missing };
        let at = key.session();
        if at >= self.by_session.len() {
            self.by_session.resize(at + 1, (0, 0));
        }
        self.by_session[at] = (key.token, i);
        Services::route_in(&services.programs[i], proc_no)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn program(number: u32, name: &'static str) -> Program {
        Program::new(number, 1).procedure(1, name, |_, _, _| Ok(()))
    }

    fn name(r: Route<'_>) -> Option<&'static str> {
        r.name()
    }

    #[test]
    fn a_session_index_reused_by_another_program_is_routed_afresh() {
        let mut services = Services::default();
        services.add(program(10, "ten"));
        services.add(program(20, "twenty"));
        let mut cache = RouteCache::default();
        // Session index 3 (bits 32..48 of the token), bound to program 10.
        let first = CallKey { token: 0x0001_0003_0000_00aa, slot: 0, call_no: 1 };
        assert_eq!(first.session(), 3);
        assert_eq!(name(cache.route(&services, first, 10, 1, 1)), Some("ten"));
        assert_eq!(name(cache.route(&services, first, 10, 1, 1)), Some("ten"), "from the cache");
        assert_eq!(name(cache.route(&services, first, 10, 1, 2)), None, "no such procedure");
        // The session ended; a new one at the same index serves program 20.
        let second = CallKey { token: 0x0001_0003_0000_00bb, ..first };
        assert_eq!(name(cache.route(&services, second, 20, 1, 1)), Some("twenty"));
        // A program the server does not have is missing, and nothing is remembered for it.
        let third = CallKey { token: 0x0001_0007_0000_00cc, ..first };
        assert_eq!(name(cache.route(&services, third, 30, 1, 1)), None);
        assert_eq!(name(cache.route(&services, second, 20, 1, 1)), Some("twenty"));
    }
}
