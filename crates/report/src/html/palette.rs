//! One colour per name (a transport, a system, a part), the same everywhere on the page.

/// Colours that stay distinguishable next to each other and in grey print; more than the names a
/// report holds (13 transports and variants), so no two share a colour.
const PALETTE: &[&str] = &[
    "#1f77b4", "#ff7f0e", "#2ca02c", "#d62728", "#9467bd", "#8c564b", "#e377c2", "#17becf", "#bcbd22", "#7f7f7f",
    "#393b79", "#637939", "#843c39", "#5254a3", "#e6550d", "#31a354", "#d6616b", "#3182bd",
];

/// Gives each name (a transport, a system, a part) the same colour everywhere on the page.
pub(super) struct Palette {
    names: Vec<String>,
}

impl Palette {
    pub(super) fn new() -> Self {
        Palette { names: Vec::new() }
    }

    pub(super) fn add(&mut self, name: &str) {
        if !self.names.iter().any(|n| n == name) {
            self.names.push(name.to_owned());
        }
    }

    pub(super) fn color(&self, name: &str) -> String {
        let i = self.names.iter().position(|n| n == name).unwrap_or(self.names.len());
        PALETTE[i % PALETTE.len()].to_owned()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_transport_of_a_full_run_gets_its_own_colour() {
        let mut pal = Palette::new();
        let names = [
            "udp",
            "udp-block",
            "tcp",
            "tcp-block",
            "unix",
            "shm-spin",
            "shm-block",
            "onc+udp",
            "onc+tcp",
            "eth",
            "xdp",
            "xdp-floor",
            "shm",
        ];
        for n in names {
            pal.add(n);
        }
        let mut colours: Vec<String> = names.iter().map(|n| pal.color(n)).collect();
        colours.sort();
        colours.dedup();
        assert_eq!(colours.len(), names.len());
    }
}
