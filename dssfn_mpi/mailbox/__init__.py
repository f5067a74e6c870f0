"""The asynchronous engine's mailboxes: one-sided RMA windows a rank's neighbours write into.

:mod:`.transport` (the mailbox a rank uses), :mod:`.rmawindow` (the window), :mod:`.slotlayout`,
:mod:`.slotreader`, :mod:`.slotwriter` and :mod:`.seqlock` (one writer per slot, torn reads
discarded), :mod:`.doneboard` (end-of-layer announcements), :mod:`.waiting` (how a rank waits
without spinning) and :mod:`.rmacheck` (whether puts are truly passive on this MPI).
"""
