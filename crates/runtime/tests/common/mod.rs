//! The lab's procedures, mirrored for the runtime's own tests (the runtime may not depend on the
//! lab crate).

use lowlat::{Client, DecodeError, Error, ProcError, Program};

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

/// One call whose arguments and result are raw bytes.
pub fn bytes(proc_no: u32, c: &Client, arg: &[u8]) -> Result<Vec<u8>, Error> {
    c.call::<_, DecodeError>(
        proc_no,
        |b| {
            b.extend_from_slice(arg);
            Ok(())
        },
        |r| Ok(r.to_vec()),
    )
}

/// What each of several calling threads checks, `t` telling its data apart from the others':
/// NULL, MINUS, then ECHO, MAXARG and MAXRESULT at each of `sizes`, every result checked.
pub fn check_lab_procedures(c: &Client, t: u8, sizes: &[usize]) {
    assert!(bytes(NULL, c, &[]).unwrap().is_empty());
    let mut ab = 7i32.to_ne_bytes().to_vec();
    ab.extend_from_slice(&(10 + t as i32).to_ne_bytes());
    assert_eq!(bytes(MINUS, c, &ab).unwrap(), (-3 - t as i32).to_ne_bytes());
    for &n in sizes {
        let msg: Vec<u8> = (0..n).map(|i| (i as u8).wrapping_add(t)).collect();
        assert!(bytes(ECHO, c, &msg).unwrap() == msg, "ECHO {n}");
        assert!(bytes(MAXARG, c, &msg).unwrap().is_empty(), "MAXARG {n}");
        let r = bytes(MAXRESULT, c, &(n as u32).to_ne_bytes()).unwrap();
        assert!(r.len() == n && r.iter().enumerate().all(|(i, &b)| b == (i % 251) as u8), "MAXRESULT {n}");
    }
}
