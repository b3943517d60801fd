//! The windowed filter's byte formats (to come).
