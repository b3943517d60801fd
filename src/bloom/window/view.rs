//! What a read of a windowed filter sees: the slices live at the clock's slice (or, where no
//! clock is read, every slice held), whether items are in them, and BF.INFO's figures of them.
//! The union's false-positive rate is one minus the chance that every live slice answers
//! absent, each slice's rate estimated from its bits (`bloom::health`).

use layerbloom_filter::bloom::health;
use layerbloom_filter::window::WindowedFilter;
use layerbloom_filter::ScalableFilter;

use crate::clock;

/// The slices a read answers from: those live at `at` (the clock's slice), or every slice
/// held where no clock is read.
pub fn live(
    filter: &WindowedFilter,
    at: Option<u64>,
) -> impl Iterator<Item = (u64, &ScalableFilter)> + '_ {
    let oldest = at.map_or(0, |c| c.saturating_sub(u64::from(filter.slices())));
    filter.slice_filters().filter(move |&(id, _)| id >= oldest)
}

/// Items added to the live slices (an estimate of the window's: an item added in two slices
/// counts twice).
pub fn items(filter: &WindowedFilter, at: Option<u64>) -> u64 {
    live(filter, at).fold(0u64, |sum, (_, f)| sum.saturating_add(f.items()))
}

/// Whether each item answers present in a read.
pub fn contains_many(filter: &WindowedFilter, items: &[&[u8]], at: Option<u64>) -> Vec<bool> {
    match at {
        Some(current) => filter.contains_many_at(items, current),
        None => filter.contains_many(items),
    }
}

/// Whether an item answers present in a read.
pub fn contains(filter: &WindowedFilter, item: &[u8], at: Option<u64>) -> bool {
    match at {
        Some(current) => filter.contains_at(item, current),
        None => filter.contains(item),
    }
}

/// BF.INFO's figures of a windowed filter, as a read sees it.
pub struct InfoView<'a> {
    pub filter: &'a WindowedFilter,
    /// The clock's slice (primary) or `None` (the slices held are the answer).
    pub at: Option<u64>,
}

impl InfoView<'_> {
    /// Layers of the live slices.
    pub fn layers(&self) -> u64 {
        live(self.filter, self.at)
            .map(|(_, f)| f.layer_count() as u64)
            .sum()
    }

    pub fn items(&self) -> u64 {
        items(self.filter, self.at)
    }

    /// The newest live slice's newest layer's fill (0 when no slice holds anything).
    pub fn fill_ratio(&self) -> f64 {
        live(self.filter, self.at)
            .last()
            .and_then(|(_, f)| f.layer_summaries().last().map(health::fill_ratio))
            .unwrap_or(0.0)
    }

    /// The live slices' union: one minus the chance that every slice answers absent.
    pub fn estimated_fpr(&self) -> f64 {
        let absent =
            live(self.filter, self.at).fold(1.0, |p, (_, f)| p * (1.0 - health::estimated_fpr(f)));
        1.0 - absent
    }

    /// The distinct items of the live slices' bits, summed (an item in two slices counts
    /// twice).
    pub fn estimated_distinct(&self) -> u64 {
        live(self.filter, self.at).fold(0u64, |sum, (_, f)| {
            sum.saturating_add(health::estimated_distinct(f))
        })
    }

    /// The age in milliseconds of the oldest live slice: to the primary's clock, or on a
    /// replica (which reads no clock) to the start of the newest slice it holds. `None` when
    /// no slice holds anything.
    pub fn oldest_age_ms(&self) -> Option<u64> {
        let (oldest, _) = live(self.filter, self.at).next()?;
        let now = match self.at {
            Some(_) => clock::now_ms(),
            None => self.filter.slice_start_ms(self.filter.head()),
        };
        Some(now.saturating_sub(self.filter.slice_start_ms(oldest)))
    }

    /// The items of each generation of the window, oldest first: `slices + 1` counts, from
    /// the slice `slices` before the current one (the head, on a replica) to it; generations
    /// before the filter's origin, and slices never written, count 0.
    pub fn slice_items(&self) -> Vec<u64> {
        let newest = self.at.unwrap_or(0).max(self.filter.head());
        let span = u64::from(self.filter.slices());
        let mut counts = vec![0u64; span as usize + 1];
        for (id, f) in live(self.filter, Some(newest)) {
            // `id` is within `newest - span ..= newest`: its place counts back from the end.
            if let Some(back) = newest.checked_sub(id).filter(|&b| b <= span) {
                counts[(span - back) as usize] = f.items();
            }
        }
        counts
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use layerbloom_filter::window::WindowSpec;
    use layerbloom_filter::FilterSpec;

    fn filter() -> WindowedFilter {
        let spec = WindowSpec {
            window_ms: 400,
            slices: 4,
            filter: FilterSpec::new(1000, 0.01, 2),
        };
        WindowedFilter::new(spec, 0, u64::MAX).unwrap()
    }

    #[test]
    fn a_read_counts_the_generations_live_at_its_slice_oldest_first() {
        let mut f = filter();
        f.add(b"a", u64::MAX).unwrap();
        f.advance_to(2);
        let added = f.add_many(&[b"b", b"c"], u64::MAX);
        assert_eq!(added, [Ok(true), Ok(true)]);
        let view = |at| InfoView { filter: &f, at };
        assert_eq!(view(Some(2)).slice_items(), [0, 0, 1, 0, 2]);
        assert_eq!(
            view(None).slice_items(),
            [0, 0, 1, 0, 2],
            "without a clock, back from the head"
        );
        // By slice 5 the first slice has left the window, though it is still held.
        assert_eq!(view(Some(5)).slice_items(), [0, 2, 0, 0, 0]);
        assert_eq!((items(&f, Some(5)), items(&f, None)), (2, 3));
        assert_eq!((view(Some(5)).layers(), view(None).layers()), (1, 2));
        assert!(!contains(&f, b"a", Some(5)) && contains(&f, b"a", None));
        assert_eq!(
            contains_many(&f, &[b"a", b"b"], Some(5)),
            [false, true],
            "the batch agrees"
        );
        assert_eq!(view(Some(7)).slice_items(), [0; 5]);
        assert_eq!(view(Some(7)).oldest_age_ms(), None);
        assert_eq!(view(Some(7)).estimated_fpr(), 0.0);
    }
}
