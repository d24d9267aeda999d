//! Describing the machine a run happens on, from /proc (no external commands).

use std::time::{SystemTime, UNIX_EPOCH};

use crate::model::{Machine, Nic};

impl Machine {
    /// Reads CPU model, CPU count, kernel release and host name from /proc, and stamps the
    /// current time. Whatever cannot be read is given as "unknown" rather than failing the run.
    pub fn detect() -> Machine {
        let read = |p: &str| std::fs::read_to_string(p).ok().map(|s| s.trim().to_owned());
        let cpuinfo = read("/proc/cpuinfo").unwrap_or_default();
        let cpu_model = cpuinfo
            .lines()
            .find_map(|l| {
                let (k, v) = l.split_once(':')?;
                (k.trim() == "model name").then(|| v.trim().to_owned())
            })
            .unwrap_or_else(|| "unknown".to_owned());
        let cores = std::thread::available_parallelism().map_or(1, |n| n.get() as u32);
        Machine {
            cpu_model,
            cores,
            kernel: read("/proc/sys/kernel/osrelease").unwrap_or_else(|| "unknown".to_owned()),
            date: rfc3339_utc(SystemTime::now()),
            hostname: read("/proc/sys/kernel/hostname"),
            notes: Vec::new(),
            nic: None,
        }
    }
}

impl Nic {
    /// One line for people: the name, then each fact, "unknown" where the machine did not say.
    pub fn describe(&self) -> String {
        let unknown = || "unknown".to_owned();
        format!(
            "{} ({}): driver {}, link speed {}, MTU {}, MAC {}, interrupt coalescing {}",
            self.name,
            self.address.clone().unwrap_or_else(unknown),
            self.driver.clone().unwrap_or_else(unknown),
            self.speed_mbps.map_or_else(unknown, |s| format!("{s} Mbit/s")),
            self.mtu.map_or_else(unknown, |m| m.to_string()),
            self.mac.clone().unwrap_or_else(unknown),
            self.coalescing.clone().unwrap_or_else(unknown),
        )
    }
}

/// Formats a time as `YYYY-MM-DDTHH:MM:SSZ` (UTC).
pub fn rfc3339_utc(t: SystemTime) -> String {
    let secs = t.duration_since(UNIX_EPOCH).map_or(0, |d| d.as_secs()) as i64;
    let (days, rem) = (secs.div_euclid(86_400), secs.rem_euclid(86_400));
    let (y, m, d) = civil_from_days(days);
    format!("{y:04}-{m:02}-{d:02}T{:02}:{:02}:{:02}Z", rem / 3600, rem % 3600 / 60, rem % 60)
}

/// Days since 1970-01-01 to (year, month, day) in the proleptic Gregorian calendar
/// (Howard Hinnant's `civil_from_days`).
fn civil_from_days(z: i64) -> (i64, u32, u32) {
    let z = z + 719_468;
    let era = z.div_euclid(146_097);
    let doe = z.rem_euclid(146_097);
    let yoe = (doe - doe / 1460 + doe / 36_524 - doe / 146_096) / 365;
    let doy = doe - (365 * yoe + yoe / 4 - yoe / 100);
    let mp = (5 * doy + 2) / 153;
    let d = (doy - (153 * mp + 2) / 5 + 1) as u32;
    let m = if mp < 10 { mp + 3 } else { mp - 9 } as u32;
    let y = yoe + era * 400 + i64::from(m <= 2);
    (y, m, d)
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::time::Duration;

    #[test]
    fn dates_format_as_rfc3339() {
        assert_eq!(rfc3339_utc(UNIX_EPOCH), "1970-01-01T00:00:00Z");
        let t = UNIX_EPOCH + Duration::from_secs(1_795_426_200); // 2026-11-23 09:30:00 UTC
        assert_eq!(rfc3339_utc(t), "2026-11-23T09:30:00Z");
        let leap = UNIX_EPOCH + Duration::from_secs(951_782_400); // 2000-02-29
        assert_eq!(rfc3339_utc(leap), "2000-02-29T00:00:00Z");
    }

    #[test]
    fn a_nic_says_unknown_for_what_it_lacks() {
        let n = Nic { name: "veth0".into(), driver: Some("veth".into()), mtu: Some(1500), ..Nic::default() };
        assert_eq!(
            n.describe(),
            "veth0 (unknown): driver veth, link speed unknown, MTU 1500, MAC unknown, interrupt coalescing unknown"
        );
    }

    #[test]
    fn this_machine_is_described() {
        let m = Machine::detect();
        assert!(m.cores >= 1);
        assert!(!m.kernel.is_empty() && m.kernel != "unknown");
        assert!(!m.cpu_model.is_empty());
        assert_eq!(m.date.len(), 20);
    }
}
