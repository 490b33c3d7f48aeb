"""The controllers that run inside the apiserver process: the objects every installation starts with
(:mod:`.bootstrap`), the namespace controller (:mod:`.namespace`) and the networking controller
(:mod:`.networking`)."""
