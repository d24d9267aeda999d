use lowlat::{ClientConfig, Server};
use lowlat_lab::interface::{self, LabClient};

#[test]
fn smoke() {
    for scheme in ["udp", "tcp"] {
        let server = Server::builder().program(interface::program()).serve(&[format!("{scheme}://127.0.0.1:0")]).unwrap();
        let uri = server.local_uris()[0].clone();
        let c = LabClient::connect(&uri, ClientConfig::default()).unwrap();
        c.null().unwrap();
        assert_eq!(c.minus(10, 3).unwrap(), 7);
        let mut out = Vec::new();
        c.maxresult(1 << 20, &mut out).unwrap();
        assert_eq!(out.len(), 1 << 20);
        let data: Vec<u8> = (0..1_000_000u32).map(|i| i as u8).collect();
        c.echo(&data, &mut out).unwrap();
        assert_eq!(out, data);
        server.shutdown();
    }
}
