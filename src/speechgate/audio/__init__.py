"""Audio values, resampling and streaming encoders."""
