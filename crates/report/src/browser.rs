//! Looking at the report as a person would: headless Chromium renders `report.html` to a PNG, and
//! the picture is checked for drawn (non-white) pixels all the way down the page.

use std::path::Path;
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

/// The Chromium binary on PATH, if any (`scripts/deps/chromium.sh` installs Debian's).
pub fn find_chromium() -> Option<&'static str> {
    ["chromium", "chromium-browser"].into_iter().find(|b| {
        Command::new(b).arg("--version").stdout(Stdio::null()).stderr(Stdio::null()).status().is_ok_and(|s| s.success())
    })
}

/// Renders `html` to `png` at `width` x `height` with a fresh profile in `profile`; kills the
/// browser (by PID) and fails if it takes longer than `timeout`.
pub fn screenshot(
    browser: &str,
    html: &Path,
    png: &Path,
    profile: &Path,
    (width, height): (u32, u32),
    timeout: Duration,
) -> Result<(), String> {
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
        .arg(format!("--window-size={width},{height}"))
        .arg(format!("file://{}", html.display()))
        .stdout(Stdio::null())
        .stderr(Stdio::piped())
        .spawn()
        .map_err(|e| format!("start {browser}: {e}"))?;
    let start = Instant::now();
    loop {
        if let Some(status) = child.try_wait().map_err(|e| format!("wait for {browser}: {e}"))? {
            let mut err = String::new();
            if let Some(mut e) = child.stderr.take() {
                use std::io::Read;
                let _ = e.read_to_string(&mut err);
            }
            return if status.success() { Ok(()) } else { Err(format!("{browser} failed ({status}): {err}")) };
        }
        if start.elapsed() > timeout {
            let _ = child.kill();
            let _ = child.wait();
            return Err(format!("{browser} did not finish within {timeout:?}"));
        }
        std::thread::sleep(Duration::from_millis(50));
    }
}

/// What a screenshot shows: its size, and how many pixels are drawn (clearly darker than the
/// near-white background) in each of `bands` horizontal bands, top to bottom.
#[derive(Clone, Debug)]
pub struct Drawn {
    /// Width of the screenshot, in pixels.
    pub width: u32,
    /// Height of the screenshot, in pixels.
    pub height: u32,
    /// Drawn pixels in each band, top band first (`bands` entries, at least one).
    pub per_band: Vec<u64>,
}

impl Drawn {
    /// Drawn pixels in the whole screenshot.
    pub fn total(&self) -> u64 {
        self.per_band.iter().sum()
    }
}

/// Counts the drawn pixels of the PNG at `png` in `bands` horizontal bands (0 is taken as 1).
/// The error names the file and says why it could not be read or decoded (or that it has fewer
/// than three colour channels).
pub fn drawn_pixels(png: &Path, bands: usize) -> Result<Drawn, String> {
    let file = std::fs::File::open(png).map_err(|e| format!("open {}: {e}", png.display()))?;
    let mut reader = png::Decoder::new(file).read_info().map_err(|e| format!("{}: not a PNG: {e}", png.display()))?;
    let mut buf = vec![0; reader.output_buffer_size()];
    let info = reader.next_frame(&mut buf).map_err(|e| format!("{}: {e}", png.display()))?;
    let channels = info.color_type.samples();
    if channels < 3 {
        return Err(format!("unexpected colour type {:?}", info.color_type));
    }
    let bands = bands.max(1);
    let mut per_band = vec![0u64; bands];
    for y in 0..info.height as usize {
        let row = &buf[y * info.line_size..(y + 1) * info.line_size];
        for px in row.chunks_exact(channels) {
            if u32::from(px[0]) + u32::from(px[1]) + u32::from(px[2]) < 3 * 200 {
                per_band[y * bands / info.height as usize] += 1;
            }
        }
    }
    Ok(Drawn { width: info.width, height: info.height, per_band })
}
