//! The page renders in a real browser: headless Chromium takes a screenshot, and the picture must
//! hold plenty of drawn (non-white) pixels, spread down the page.
//!
//! Chromium comes from `scripts/deps/chromium.sh`. Without it the test says so and passes, unless
//! LOWLAT_REQUIRE_CHROMIUM=1 (set by CI after installing it), where a missing browser fails.

use std::path::Path;
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

use lowlat_report::{render_html, sample::sample_results};

const WIDTH: u32 = 1280;
const HEIGHT: u32 = 4000;
const BROWSER_TIMEOUT: Duration = Duration::from_secs(90);

fn chromium() -> Option<&'static str> {
    ["chromium", "chromium-browser"].into_iter().find(|b| {
        Command::new(b)
            .arg("--version")
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .status()
            .is_ok_and(|s| s.success())
    })
}

/// Runs the browser with a deadline; on timeout kills it by its PID and fails.
fn screenshot(browser: &str, html: &Path, png: &Path, profile: &Path) {
    let mut child = Command::new(browser)
        .args([
            "--headless",
            "--no-sandbox",
            "--disable-gpu",
            "--disable-quic",
            "--no-first-run",
            "--disable-background-networking",
            "--disable-component-update",
            "--disable-sync",
            "--hide-scrollbars",
        ])
        .arg(format!("--user-data-dir={}", profile.display()))
        .arg(format!("--screenshot={}", png.display()))
        .arg(format!("--window-size={WIDTH},{HEIGHT}"))
        .arg(format!("file://{}", html.display()))
        .stdout(Stdio::null())
        .stderr(Stdio::piped())
        .spawn()
        .expect("start chromium");
    let start = Instant::now();
    loop {
        if let Some(status) = child.try_wait().expect("wait for chromium") {
            let mut err = String::new();
            if let Some(mut e) = child.stderr.take() {
                use std::io::Read;
                let _ = e.read_to_string(&mut err);
            }
            assert!(status.success(), "chromium failed ({status}): {err}");
            return;
        }
        if start.elapsed() > BROWSER_TIMEOUT {
            let _ = child.kill();
            let _ = child.wait();
            panic!("chromium did not finish within {BROWSER_TIMEOUT:?}");
        }
        std::thread::sleep(Duration::from_millis(50));
    }
}

#[test]
fn report_renders_in_headless_chromium() {
    let Some(browser) = chromium() else {
        let required = std::env::var("LOWLAT_REQUIRE_CHROMIUM").is_ok_and(|v| v == "1");
        assert!(
            !required,
            "chromium is required but missing: run scripts/deps/chromium.sh"
        );
        eprintln!("SKIPPED: chromium not installed (scripts/deps/chromium.sh installs it)");
        return;
    };
    let dir = tempfile::tempdir().unwrap();
    let html = dir.path().join("report.html");
    let png = dir.path().join("report.png");
    let profile = dir.path().join("profile");
    std::fs::write(&html, render_html(&sample_results())).unwrap();
    screenshot(browser, &html, &png, &profile);
    if let Ok(keep) = std::env::var("LOWLAT_KEEP_SCREENSHOT") {
        std::fs::copy(&png, keep).unwrap();
    }

    let decoder = png::Decoder::new(std::fs::File::open(&png).expect("screenshot written"));
    let mut reader = decoder.read_info().expect("a PNG");
    let mut buf = vec![0; reader.output_buffer_size()];
    let info = reader.next_frame(&mut buf).expect("PNG pixels");
    assert_eq!((info.width, info.height), (WIDTH, HEIGHT));
    let channels = info.color_type.samples();
    assert!(
        channels >= 3,
        "unexpected colour type {:?}",
        info.color_type
    );
    let row_bytes = info.line_size;

    // "Drawn" = clearly darker than the near-white page background.
    let mut drawn_per_band = [0u64; 8];
    let mut drawn = 0u64;
    for y in 0..info.height as usize {
        let row = &buf[y * row_bytes..(y + 1) * row_bytes];
        for px in row.chunks_exact(channels) {
            if u32::from(px[0]) + u32::from(px[1]) + u32::from(px[2]) < 3 * 200 {
                drawn += 1;
                drawn_per_band[y * drawn_per_band.len() / info.height as usize] += 1;
            }
        }
    }
    let total = u64::from(WIDTH) * u64::from(HEIGHT);
    assert!(
        drawn * 100 > total,
        "only {drawn} of {total} pixels are drawn: the page looks blank"
    );
    // Text and plots all the way down, not just a header above an empty page.
    for (i, band) in drawn_per_band.iter().enumerate() {
        assert!(
            *band > 2000,
            "band {i} of the screenshot is nearly empty ({band} drawn pixels)"
        );
    }
}
