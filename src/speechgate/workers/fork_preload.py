"""Imported by the fork server only, after the engines' modules (`workers.forking`): what every
engine process reads before its first job, read once there, so that each process it forks
starts with it."""

import gc

from speechgate.text import normalize

normalize.warm_all()
# What the fork server has imported lives as long as every engine process: set aside from the
# collector, whose full passes would walk all of it in each of them and, writing to every
# object's header, copy the memory they share with the fork server.
gc.freeze()
