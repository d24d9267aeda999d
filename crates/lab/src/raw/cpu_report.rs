//! How a raw echo server tells its client the CPU time its serving thread has used, in band:
//! the client sends the 8-byte [`ASK`]; the server answers [`ASK`] followed by its thread's CPU
//! clock (ns, little-endian), instead of an echo. A client takes one reading before and one after
//! its measured exchanges, with none outstanding, so the server's CPU per exchange comes from the
//! serving thread's own clock, whatever else the server's process does.
//!
//! Ordinary messages never look like [`ASK`]: a pipelined exchange starts each with its sequence
//! number (below 2^63, little-endian), a latency exchange with the bytes 0, 1, 2, ...; [`ASK`]'s
//! last byte is 0xff. A server that does not know the question echoes it, which the client reads
//! as "no report" ([`Answer::Echoed`]).

/// The question: 8 bytes, the last 0xff (so that, read as a little-endian u64, it is 2^63 or
/// more, which no sequence number reaches).
pub const ASK: [u8; 8] = *b"LlCpu?\xff\xff";
/// Bytes of an answer.
pub const ANSWER_LEN: usize = 16;

/// The answer to `message` if it is the question: [`ASK`] then the calling thread's CPU time.
#[inline]
pub fn answer(message: &[u8]) -> Option<[u8; ANSWER_LEN]> {
    if message != ASK {
        return None;
    }
    let mut a = [0u8; ANSWER_LEN];
    a[..8].copy_from_slice(&ASK);
    a[8..].copy_from_slice(&(lowlat_sys::process::thread_cpu_time().as_nanos() as u64).to_le_bytes());
    Some(a)
}

/// What a message received by a client says about a report.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Answer {
    /// Not about a report: an ordinary echo.
    Other,
    /// The server's serving thread had used this many ns of CPU.
    Cpu(u64),
    /// The question came back unanswered: the server echoes but does not report.
    Echoed,
}

/// Reads `message` as a possible answer to [`ASK`].
#[inline]
pub fn parse(message: &[u8]) -> Answer {
    match message.split_first_chunk::<8>() {
        Some((head, rest)) if *head == ASK => match <[u8; 8]>::try_from(rest) {
            Ok(ns) => Answer::Cpu(u64::from_le_bytes(ns)),
            Err(_) if rest.is_empty() => Answer::Echoed,
            Err(_) => Answer::Other,
        },
        _ => Answer::Other,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_question_is_answered_and_read_back() {
        let a = answer(&ASK).unwrap();
        assert!(matches!(parse(&a), Answer::Cpu(_)));
        assert_eq!(parse(&ASK), Answer::Echoed);
        assert_eq!(answer(&ASK[..7]), None);
        assert_eq!(answer(&1u64.to_le_bytes()), None);
        // A latency exchange's message, and a pipelined one's (sequence number first).
        let latency: Vec<u8> = (0..32).map(|i| i as u8).collect();
        assert_eq!(answer(&latency[..8]), None);
        assert_eq!(parse(&latency), Answer::Other);
        assert_eq!(parse(&((1u64 << 63) - 1).to_le_bytes()), Answer::Other);
    }
}
