"""The feeder: an array larger than the site's submit limits, split into parts that fit and
submitted as earlier parts finish (issue 28, item 1)."""
