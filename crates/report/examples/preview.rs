//! Writes the page for the built-in sample results, to look at the layout without running the lab:
//! `cargo run -p lowlat-report --example preview -- /tmp/report.html`

fn main() {
    let path = std::env::args().nth(1).unwrap_or_else(|| "report.html".to_owned());
    let html = lowlat_report::render_html(&lowlat_report::sample::sample_results());
    if let Err(e) = std::fs::write(&path, html) {
        eprintln!("cannot write {path}: {e}");
        std::process::exit(1);
    }
    println!("{path}");
}
