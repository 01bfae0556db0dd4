//! Median and spread of repeated measurements.

/// Summary of repeated measurements of one metric.
#[derive(Debug, Clone, Copy, PartialEq, serde::Serialize, serde::Deserialize)]
pub struct Summary {
    pub median: f64,
    pub min: f64,
    pub max: f64,
    /// Relative standard deviation, in percent of the mean.
    pub rsd_percent: f64,
    pub samples: usize,
}

/// Summarizes `xs` (at least one sample).
pub fn summarize(xs: &[f64]) -> Summary {
    assert!(!xs.is_empty(), "no samples");
    let mut v = xs.to_vec();
    v.sort_by(|a, b| a.total_cmp(b));
    let n = v.len();
    let median = if n % 2 == 1 {
        v[n / 2]
    } else {
        (v[n / 2 - 1] + v[n / 2]) / 2.0
    };
    let mean = v.iter().sum::<f64>() / n as f64;
    let var = v.iter().map(|x| (x - mean).powi(2)).sum::<f64>() / n as f64;
    let rsd_percent = if mean == 0.0 {
        0.0
    } else {
        100.0 * var.sqrt() / mean
    };
    Summary {
        median,
        min: v[0],
        max: v[n - 1],
        rsd_percent,
        samples: n,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn median_of_odd_and_even() {
        assert_eq!(summarize(&[3.0, 1.0, 2.0]).median, 2.0);
        assert_eq!(summarize(&[4.0, 1.0, 2.0, 3.0]).median, 2.5);
        assert_eq!(summarize(&[5.0, 5.0]).rsd_percent, 0.0);
    }
}
