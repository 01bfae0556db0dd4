//! Which (file size, record size) cells an iozone run measures: IOzone's
//! automatic mode doubles both sizes over a range and skips records larger
//! than the file.

const KIB: u64 = 1 << 10;
const MIB: u64 = 1 << 20;
const GIB: u64 = 1 << 30;

/// Smallest file: one page, the least a file can be mapped with.
pub const MIN_FILE: u64 = 4 * KIB;
/// Smallest record: one 8-byte word, the unit of the load/store modes.
pub const MIN_RECORD: u64 = 8;
/// Upper bound on the doubling ranges, so a typo cannot ask for 2^60 bytes.
const MAX_SIZE: u64 = 64 * GIB;

/// One cell of the matrix.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Cell {
    pub file: u64,
    pub record: u64,
}

impl Cell {
    /// Records per pass; a file that is not a multiple of the record is
    /// covered up to its last whole record, as IOzone does.
    pub fn records(&self) -> u64 {
        self.file / self.record
    }

    /// Bytes one pass moves: the same for every mode and target.
    pub fn bytes(&self) -> u64 {
        self.records() * self.record
    }

    /// How a metric names the cell, e.g. `f=1MiB r=4KiB`.
    pub fn label(&self) -> String {
        format!("f={} r={}", size_label(self.file), size_label(self.record))
    }
}

/// File sizes × record sizes, both ascending.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Matrix {
    pub file_sizes: Vec<u64>,
    pub record_sizes: Vec<u64>,
}

impl Default for Matrix {
    /// 64 KiB..64 MiB files × 4 KiB..1 MiB records: every kind of cell,
    /// within a couple of minutes per target on a 2-core machine.
    fn default() -> Matrix {
        Matrix {
            file_sizes: doubling(64 * KIB, 64 * MIB).expect("valid range"),
            record_sizes: doubling(4 * KIB, MIB).expect("valid range"),
        }
    }
}

impl Matrix {
    /// IOzone's full automatic range: 64 KiB..1 GiB × 64 B..16 MiB.
    pub fn full() -> Matrix {
        Matrix {
            file_sizes: doubling(64 * KIB, GIB).expect("valid range"),
            record_sizes: doubling(64, 16 * MIB).expect("valid range"),
        }
    }

    /// A matrix from explicit lists, checked: sizes the modes can run,
    /// sorted, without repeats.
    pub fn new(mut file_sizes: Vec<u64>, mut record_sizes: Vec<u64>) -> Result<Matrix, String> {
        for &f in &file_sizes {
            if !(MIN_FILE..=MAX_SIZE).contains(&f) {
                return Err(format!(
                    "file size {f} is outside {}..{}",
                    size_label(MIN_FILE),
                    size_label(MAX_SIZE)
                ));
            }
        }
        for &r in &record_sizes {
            if !(MIN_RECORD..=MAX_SIZE).contains(&r) || !r.is_multiple_of(8) {
                return Err(format!(
                    "record size {r} must be a multiple of 8 bytes between {} and {}",
                    size_label(MIN_RECORD),
                    size_label(MAX_SIZE)
                ));
            }
        }
        file_sizes.sort_unstable();
        file_sizes.dedup();
        record_sizes.sort_unstable();
        record_sizes.dedup();
        let m = Matrix {
            file_sizes,
            record_sizes,
        };
        if m.cells().is_empty() {
            return Err(
                "no cell to measure: every record size is larger than every file size".into(),
            );
        }
        Ok(m)
    }

    /// Every cell with the record no larger than the file, file size major
    /// (IOzone's report order).
    pub fn cells(&self) -> Vec<Cell> {
        self.file_sizes
            .iter()
            .flat_map(|&file| {
                self.record_sizes
                    .iter()
                    .filter(move |&&record| record <= file)
                    .map(move |&record| Cell { file, record })
            })
            .collect()
    }
}

/// `min`, `2 min`, `4 min`, ... up to `max` inclusive. Both must be powers
/// of two so every step lands on a size IOzone would pick.
pub fn doubling(min: u64, max: u64) -> Result<Vec<u64>, String> {
    if !min.is_power_of_two() || !max.is_power_of_two() {
        return Err(format!(
            "range ends {min} and {max} must be powers of two (use a list for other sizes)"
        ));
    }
    if min > max || max > MAX_SIZE {
        return Err(format!(
            "range {}..{} is empty or above {}",
            size_label(min),
            size_label(max),
            size_label(MAX_SIZE)
        ));
    }
    // At most 64 steps: `max` is a power of two at most 2^36.
    Ok((min.trailing_zeros()..=max.trailing_zeros())
        .map(|shift| 1u64 << shift)
        .collect())
}

/// `64B`, `4KiB`, `1MiB`, `1536KiB`: the largest binary unit that divides
/// the size exactly, so labels never round.
pub fn size_label(bytes: u64) -> String {
    for (unit, name) in [(GIB, "GiB"), (MIB, "MiB"), (KIB, "KiB")] {
        if bytes >= unit && bytes.is_multiple_of(unit) {
            return format!("{}{name}", bytes / unit);
        }
    }
    format!("{bytes}B")
}

#[cfg(test)]
mod matrix_tests {
    use super::*;

    #[test]
    fn default_matrix_doubles_and_skips_records_larger_than_the_file() {
        let m = Matrix::default();
        assert_eq!(m.file_sizes.len(), 11);
        assert_eq!(m.record_sizes.len(), 9);
        let cells = m.cells();
        assert!(cells.iter().all(|c| c.record <= c.file));
        // 64 KiB files take 4..64 KiB records (5), 128 KiB six, ... and
        // from 1 MiB on all nine.
        assert_eq!(cells.len(), 5 + 6 + 7 + 8 + 9 * 7);
        assert_eq!(
            cells[0],
            Cell {
                file: 64 * KIB,
                record: 4 * KIB
            }
        );
        assert_eq!(
            cells.last().unwrap(),
            &Cell {
                file: 64 * MIB,
                record: MIB
            }
        );
    }

    #[test]
    fn full_matrix_spans_iozones_range() {
        let m = Matrix::full();
        assert_eq!(m.file_sizes.first(), Some(&(64 * KIB)));
        assert_eq!(m.file_sizes.last(), Some(&GIB));
        assert_eq!(m.record_sizes.first(), Some(&64));
        assert_eq!(m.record_sizes.last(), Some(&(16 * MIB)));
        let biggest = m.cells().into_iter().filter(|c| c.file == GIB).count();
        assert_eq!(biggest, m.record_sizes.len());
    }

    #[test]
    fn lists_are_sorted_checked_and_cells_count_whole_records() {
        let m = Matrix::new(vec![3 * MIB, MIB, MIB], vec![2 * MIB, 4096]).unwrap();
        assert_eq!(m.file_sizes, vec![MIB, 3 * MIB]);
        let cells = m.cells();
        assert_eq!(cells.len(), 3);
        let odd = Cell {
            file: 3 * MIB,
            record: 2 * MIB,
        };
        assert_eq!(cells[2], odd);
        assert_eq!(odd.records(), 1);
        assert_eq!(odd.bytes(), 2 * MIB);
        assert!(Matrix::new(vec![MIB], vec![12]).is_err());
        assert!(Matrix::new(vec![1000], vec![64]).is_err());
        assert!(Matrix::new(vec![64 * KIB], vec![MIB]).is_err());
    }

    #[test]
    fn doubling_needs_powers_of_two_in_order() {
        assert_eq!(doubling(4096, 16384).unwrap(), vec![4096, 8192, 16384]);
        assert!(doubling(3000, 16384).is_err());
        assert!(doubling(16384, 4096).is_err());
    }

    #[test]
    fn labels_use_exact_binary_units() {
        assert_eq!(size_label(64), "64B");
        assert_eq!(size_label(4096), "4KiB");
        assert_eq!(size_label(1536 * KIB), "1536KiB");
        assert_eq!(size_label(GIB), "1GiB");
        assert_eq!(
            Cell {
                file: MIB,
                record: 4096
            }
            .label(),
            "f=1MiB r=4KiB"
        );
    }
}
