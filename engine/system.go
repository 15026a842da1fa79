package engine

import "slices"

// System instructions (CIP-1 §12): the validator set's emergency tools.
// Each is sent by a system deployer (Config.SystemDeployers; ErrNotSystem
// for anyone else) in the open block, outside any transaction, and takes
// effect at once, except the config update, which the next block reads.

func (e *Engine) systemCall(sender Address) error {
	switch {
	case e.cfg.Policy != PolicyLane:
		return ErrNeedsLane
	case e.phase != phaseTxs:
		return e.notInTxs()
	case e.txs.open:
		return ErrTxOpen
	case !slices.Contains(e.cfg.SystemDeployers, sender):
		return ErrNotSystem
	}
	return nil
}

// SystemCancel is SYS_CANCEL_TIMER: timer id is collected without firing,
// whoever owns it, and reported as Collected with reason SystemCancel.
func (e *Engine) SystemCancel(sender Address, id TimerID) error {
	if err := e.systemCall(sender); err != nil {
		return err
	}
	i, ok := e.ids.get(&id)
	if !ok {
		return ErrUnknownTimer
	}
	e.collect(i, SystemCancel)
	e.lane.sysGC++
	e.raiseObserverPanic()
	return nil
}

// SystemExtend is SYS_EXTEND_TIMER: Extend without the owner check.
func (e *Engine) SystemExtend(sender Address, id TimerID, expiresAt uint64) error {
	if err := e.systemCall(sender); err != nil {
		return err
	}
	i, ok := e.ids.get(&id)
	if !ok {
		return ErrUnknownTimer
	}
	u, err := e.extend(i, expiresAt)
	if err == nil {
		e.histOp(u)
	}
	return err
}

// SystemUpdateConfig is SYS_UPDATE_TIMER_CONFIG: p replaces the lane
// parameters from the next block on. Of several updates in one block the
// last wins. An invalid p is refused with ErrInvalidConfig and changes
// nothing.
func (e *Engine) SystemUpdateConfig(sender Address, p LaneParams) error {
	if err := e.systemCall(sender); err != nil {
		return err
	}
	if err := p.Validate(); err != nil {
		return err
	}
	e.lane.update = &p
	return nil
}
