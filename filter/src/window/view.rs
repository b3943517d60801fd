//! What a read of a windowed filter sees ([`ReadView`]): the slices live at a time (on the
//! primary, its clock's), or, with no time (a replica, a command from the primary, AOF
//! replay: they read no clock), every slice held; whether items are in them; and the figures
//! `BF.INFO` and `BF.CARD` report of them. A read never changes the filter: slices that left
//! the window stay held until an advance drops them.
//!
//! The math of the union of the live slices:
//! - its false-positive rate is one minus the chance that every live slice answers absent,
//!   `1 - Π (1 - fpr_i)`, each slice's rate estimated from its bits
//!   (`bloom::health::estimated_fpr`), the slices' hashes being independent of each other's
//!   bits;
//! - its items and distinct items are the slices' sums (an item added in two slices counts
//!   twice: an upper estimate of the window's).

use crate::bloom::health;
use crate::window::WindowedFilter;
use crate::ScalableFilter;

/// A read of a windowed filter at a time (or at none: the slices held).
#[derive(Clone, Copy)]
pub struct ReadView<'a> {
    filter: &'a WindowedFilter,
    /// The time of the read, on the primary; `None` where no clock is read.
    now_ms: Option<u64>,
    /// The slice of `now_ms`.
    at: Option<u64>,
}

impl<'a> ReadView<'a> {
    /// A read at `now_ms` (`None`: the slices held are the answer).
    pub fn new(filter: &'a WindowedFilter, now_ms: Option<u64>) -> Self {
        ReadView {
            filter,
            now_ms,
            at: now_ms.map(|ms| filter.slice_of(ms)),
        }
    }

    /// The slices the read answers from: those live at its slice, or every slice held.
    pub fn live(&self) -> impl Iterator<Item = (u64, &'a ScalableFilter)> + 'a {
        slices_live(self.filter, self.at)
    }

    /// Whether an item answers present.
    pub fn contains(&self, item: &[u8]) -> bool {
        match self.at {
            Some(current) => self.filter.contains_at(item, current),
            None => self.filter.contains(item),
        }
    }

    /// Whether each item answers present.
    pub fn contains_many(&self, items: &[&[u8]]) -> Vec<bool> {
        match self.at {
            Some(current) => self.filter.contains_many_at(items, current),
            None => self.filter.contains_many(items),
        }
    }

    /// Items added to the live slices.
    pub fn items(&self) -> u64 {
        self.live()
            .fold(0u64, |sum, (_, f)| sum.saturating_add(f.items()))
    }

    /// Layers of the live slices.
    pub fn layers(&self) -> u64 {
        self.live().map(|(_, f)| f.layer_count() as u64).sum()
    }

    /// The newest live slice's newest layer's fill (0 when no slice holds anything).
    pub fn fill_ratio(&self) -> f64 {
        self.live()
            .last()
            .and_then(|(_, f)| f.layer_summaries().last().map(health::fill_ratio))
            .unwrap_or(0.0)
    }

    /// The live slices' union: one minus the chance that every slice answers absent.
    pub fn estimated_fpr(&self) -> f64 {
        let absent = self
            .live()
            .fold(1.0, |p, (_, f)| p * (1.0 - health::estimated_fpr(f)));
        1.0 - absent
    }

    /// The distinct items of the live slices' bits, summed.
    pub fn estimated_distinct(&self) -> u64 {
        self.live().fold(0u64, |sum, (_, f)| {
            sum.saturating_add(health::estimated_distinct(f))
        })
    }

    /// The age in milliseconds of the oldest live slice: to the read's time, or, with none,
    /// to the start of the newest slice held. `None` when no slice holds anything.
    pub fn oldest_age_ms(&self) -> Option<u64> {
        let (oldest, _) = self.live().next()?;
        let now = self
            .now_ms
            .unwrap_or_else(|| self.filter.slice_start_ms(self.filter.head()));
        Some(now.saturating_sub(self.filter.slice_start_ms(oldest)))
    }

    /// The items of each generation of the window, oldest first: `slices + 1` counts, from
    /// the slice `slices` before the read's (the head, with no time) to it; generations
    /// before the filter's origin, and slices never written, count 0.
    pub fn slice_items(&self) -> Vec<u64> {
        let newest = self.at.unwrap_or(0).max(self.filter.head());
        let span = u64::from(self.filter.slices());
        let mut counts = vec![0u64; span as usize + 1];
        for (id, f) in slices_live(self.filter, Some(newest)) {
            // `id` is within `newest - span ..= newest`: its place counts back from the end.
            if let Some(back) = newest.checked_sub(id).filter(|&b| b <= span) {
                counts[(span - back) as usize] = f.items();
            }
        }
        counts
    }
}

/// The slices live at slice `at` (`None`: every slice held).
fn slices_live(
    filter: &WindowedFilter,
    at: Option<u64>,
) -> impl Iterator<Item = (u64, &ScalableFilter)> + '_ {
    let oldest = at.map_or(0, |c| c.saturating_sub(u64::from(filter.slices())));
    filter.slice_filters().filter(move |&(id, _)| id >= oldest)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::window::WindowSpec;
    use crate::FilterSpec;

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
        // Slices are 100 ms: slice k starts at k * 100 from the origin 0.
        let view = |at: Option<u64>| ReadView::new(&f, at.map(|slice| slice * 100));
        assert_eq!(view(Some(2)).slice_items(), [0, 0, 1, 0, 2]);
        assert_eq!(
            view(None).slice_items(),
            [0, 0, 1, 0, 2],
            "without a clock, back from the head"
        );
        // By slice 5 the first slice has left the window, though it is still held.
        assert_eq!(view(Some(5)).slice_items(), [0, 2, 0, 0, 0]);
        assert_eq!((view(Some(5)).items(), view(None).items()), (2, 3));
        assert_eq!((view(Some(5)).layers(), view(None).layers()), (1, 2));
        assert!(!view(Some(5)).contains(b"a") && view(None).contains(b"a"));
        assert_eq!(
            view(Some(5)).contains_many(&[b"a", b"b"]),
            [false, true],
            "the batch agrees"
        );
        assert_eq!(view(Some(7)).slice_items(), [0; 5]);
        assert_eq!(view(Some(7)).oldest_age_ms(), None);
        assert_eq!(view(Some(7)).estimated_fpr(), 0.0);
        // The oldest live slice (2, from 200 ms) at 550 ms, and on a replica to the head's
        // start (200 ms).
        assert_eq!(ReadView::new(&f, Some(550)).oldest_age_ms(), Some(350));
        assert_eq!(view(None).oldest_age_ms(), Some(200));
    }
}
