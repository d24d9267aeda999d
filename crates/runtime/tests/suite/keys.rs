//! Keyed bindings: a client and a server sharing a pre-shared key call as any other pair, and
//! every way their keys can disagree is reported as what it is.

use lowlat::{Client, ClientConfig, Error, KeyMismatch, Psk, ServerConfig};

use super::*;
use crate::common::{Lab, PROG};

/// A pre-shared key of the suite's (`n` picks one of several).
fn psk(n: u8) -> Psk {
    Psk::new(&[n; 32]).unwrap()
}

/// With a pre-shared key, every lab procedure works at the edge sizes (frames tagged both ways,
/// multi-fragment messages included) and the counters show not one tag failed; a client without
/// the key is refused at once with the typed error that says so; one with another key, or with
/// one where the server has none, cannot verify what the server answers, so it believes none
/// of it and reports an unauthenticated refusal at its bind's deadline. Over shm:// keys are
/// not used (the rings are private to two processes whose credentials the server checked):
/// every client binds. ONC RPC takes no key.
pub fn keyed_bindings_work_and_key_mismatches_are_reported(t: &'static Transport) {
    if t.caps.xdr {
        return;
    }
    let Some(env) = Env::new(t) else { return };
    let (server, uri) = env.serve(ServerConfig { psk: Some(psk(1)), ..ServerConfig::default() });
    let private = t.scheme == "shm";
    let u = uri.clone();
    env.on_client(60, move || {
        let cfg = |key: Option<Psk>| ClientConfig {
            psk: key,
            bind_timeout: Duration::from_millis(1500),
            ..ClientConfig::default()
        };
        let client = Client::connect_with(&u, PROG, 1, cfg(Some(psk(1)))).unwrap();
        assert_eq!(client.session().keyed, !private, "whether frames carry tags");
        let frame = one_frame(&client, Encoding::Native);
        let mut sizes = vec![0, 1, frame - 1, frame, frame + 1, 100_000];
        sizes.retain(|&n| n <= client.max_message());
        Lab::new(&client).check(1, &sizes);
        assert_eq!(client.stats().mac_failures, 0);
        // Encrypted as well: every procedure at the edge sizes of a sealed frame (its trailer is
        // 8 bytes longer than a tag), multi-fragment messages included; refused over shm.
        let sealed = Client::connect_with(&u, PROG, 1, ClientConfig { encrypt: true, ..cfg(Some(psk(1))) });
        match sealed {
            Ok(sealed) => {
                assert!(!private && sealed.session().sealed);
                let frame = one_frame(&sealed, Encoding::Native);
                let mut sizes = vec![0, 1, frame - 1, frame, frame + 1, 100_000];
                sizes.retain(|&n| n <= sealed.max_message());
                Lab::new(&sealed).check(2, &sizes);
                assert_eq!(sealed.stats().mac_failures, 0);
            }
            Err(e) => assert!(private && matches!(e, Error::Encryption { .. }), "{e}"),
        }
        for key in [None, Some(psk(2))] {
            let begun = Instant::now();
            let got = Client::connect_with(&u, PROG, 1, cfg(key.clone()));
            if private {
                assert!(got.is_ok(), "shm binds whatever the key: {:?}", got.err());
                continue;
            }
            let e = got.unwrap_err();
            if key.is_none() {
                let want = KeyMismatch::ServerRequiresKey;
                assert!(matches!(&e, Error::KeyMismatch { reason, .. } if *reason == want), "{e}");
                assert!(begun.elapsed() < Duration::from_secs(1), "refused at once, not after a timeout: {e}");
            } else {
                assert!(matches!(&e, Error::UnauthenticatedRefusal { .. }), "{e}");
                assert!(begun.elapsed() >= Duration::from_millis(1500), "kept trying until the deadline: {e}");
            }
            assert!(!e.may_have_executed());
        }
    });
    let stats = &server.stats()[0].1;
    assert_eq!(stats.mac_failures, 0, "{stats:?}");
    if !private {
        // The keyless bind, refused; once more if the client sent it again before the refusal
        // reached it (a loaded host).
        assert!((1..=2).contains(&stats.refused_key_required), "{stats:?}");
    }
    server.shutdown();
    let (open, uri) = env.serve(ServerConfig::default());
    env.on_client(10, move || {
        let cfg =
            ClientConfig { psk: Some(psk(1)), bind_timeout: Duration::from_millis(1500), ..ClientConfig::default() };
        match Client::connect_with(&uri, PROG, 1, cfg) {
            Ok(c) => assert!(private && !c.session().keyed),
            Err(e) => {
                assert!(matches!(&e, Error::UnauthenticatedRefusal { claim: Some(_), .. }), "{e}");
                assert!(e.to_string().contains("configured without one"), "the claim is quoted: {e}");
            }
        }
    });
    open.shutdown();
}
