//! The lab's procedures, mirrored for the runtime's own tests (the runtime may not depend on the
//! lab crate).

use lowlat::{ProcError, Program};

pub const PROG: u32 = 0x2000_4C4C;
pub const NULL: u32 = 0;
pub const MINUS: u32 = 1;
pub const MAXARG: u32 = 2;
pub const MAXRESULT: u32 = 3;
pub const ECHO: u32 = 4;

/// NULL, MINUS, MAXARG, MAXRESULT and ECHO with native-order bodies, as the lab serves them.
pub fn lab_program() -> Program {
    Program::new(PROG, 1)
        .procedure(NULL, "NULL", |_, a, _| if a.is_empty() { Ok(()) } else { Err(ProcError::GarbageArgs) })
        .procedure(MINUS, "MINUS", |_, a, r| {
            let a: [u8; 8] = a.try_into().map_err(|_| ProcError::GarbageArgs)?;
            let x = i32::from_ne_bytes([a[0], a[1], a[2], a[3]]);
            let y = i32::from_ne_bytes([a[4], a[5], a[6], a[7]]);
            r.extend_from_slice(&x.wrapping_sub(y).to_ne_bytes());
            Ok(())
        })
        .procedure(MAXARG, "MAXARG", |_, _, _| Ok(()))
        .procedure(MAXRESULT, "MAXRESULT", |_, a, r| {
            let n: [u8; 4] = a.try_into().map_err(|_| ProcError::GarbageArgs)?;
            r.extend((0..u32::from_ne_bytes(n) as usize).map(|i| (i % 251) as u8));
            Ok(())
        })
        .procedure(ECHO, "ECHO", |_, a, r| {
            r.extend_from_slice(a);
            Ok(())
        })
}
