"""The loader: the training datasets' side, units -> rows -> ``parse_row`` -> samples, on either
backend (rows come from :mod:`editstream.data`); it never imports the converter."""
