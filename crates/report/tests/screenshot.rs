//! The page renders in a real browser: headless Chromium takes a screenshot, and the picture must
//! hold plenty of drawn (non-white) pixels, spread down the page.
//!
//! Chromium comes from `scripts/deps/chromium.sh`. Without it the test says so and passes, unless
//! LOWLAT_REQUIRE_CHROMIUM=1 (set by CI after installing it), where a missing browser fails.

use std::time::Duration;

use lowlat_report::browser::{drawn_pixels, find_chromium, screenshot};
use lowlat_report::{render_html, sample::sample_results};

const WIDTH: u32 = 1280;
const HEIGHT: u32 = 4000;
const BROWSER_TIMEOUT: Duration = Duration::from_secs(90);

#[test]
fn report_renders_in_headless_chromium() {
    let Some(browser) = find_chromium() else {
        let required = std::env::var("LOWLAT_REQUIRE_CHROMIUM").is_ok_and(|v| v == "1");
        assert!(!required, "chromium is required but missing: run scripts/deps/chromium.sh");
        eprintln!("SKIPPED: chromium not installed (scripts/deps/chromium.sh installs it)");
        return;
    };
    let dir = tempfile::tempdir().unwrap();
    let html = dir.path().join("report.html");
    let png = dir.path().join("report.png");
    let profile = dir.path().join("profile");
    std::fs::write(&html, render_html(&sample_results())).unwrap();
    screenshot(browser, &html, &png, &profile, (WIDTH, HEIGHT), BROWSER_TIMEOUT).unwrap();
    if let Ok(keep) = std::env::var("LOWLAT_KEEP_SCREENSHOT") {
        std::fs::copy(&png, keep).unwrap();
    }
    let d = drawn_pixels(&png, 8).unwrap();
    assert_eq!((d.width, d.height), (WIDTH, HEIGHT));
    let (drawn, total) = (d.total(), u64::from(WIDTH) * u64::from(HEIGHT));
    assert!(drawn * 100 > total, "only {drawn} of {total} pixels are drawn: the page looks blank");
    let drawn_per_band = d.per_band;
    // Text and plots all the way down, not just a header above an empty page.
    for (i, band) in drawn_per_band.iter().enumerate() {
        assert!(*band > 2000, "band {i} of the screenshot is nearly empty ({band} drawn pixels)");
    }
}
