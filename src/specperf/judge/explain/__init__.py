"""``specperf explain``'s judging: what the baseline predicts for an observation
(``prediction``), what production showed (``observation``), which factor explains the
difference (``diagnosis``) and the explanation that joins them (``explanation``)."""
