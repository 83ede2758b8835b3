package steps

import "sync"

// Background is work that runs while the steps before the one that needs it go on (a build of
// minutes overlapping the cluster's creation). The step that needs it waits for it on its task,
// which shows what the work says meanwhile. Its value may be waited for any number of times.
// The work ends with the context it was given by whoever started it: Background cancels nothing.
type Background[T any] struct {
	done  chan struct{}
	value T
	err   error

	mu    sync.Mutex
	doing string // what the work said last
	task  *Task  // the task waiting for it, if one is
}

// Go starts work, which says what it is doing through the function it is given.
func Go[T any](work func(progress func(string)) (T, error)) *Background[T] {
	b := &Background[T]{done: make(chan struct{})}
	go func() {
		defer close(b.done)
		b.value, b.err = work(b.say)
	}()
	return b
}

func (b *Background[T]) say(doing string) {
	b.mu.Lock()
	defer b.mu.Unlock()
	b.doing = doing
	if b.task != nil {
		b.task.Doing(doing)
	}
}

// Done is closed once the work has ended, for a select beside a context.
func (b *Background[T]) Done() <-chan struct{} { return b.done }

// Wait waits for the work and gives what it made. A task, when given, shows what the work says
// until then, and fails with it; nil waits in silence (work that shows elsewhere, or none).
func (b *Background[T]) Wait(task *Task) (T, error) {
	if task == nil {
		<-b.done
		return b.value, b.err
	}
	b.mu.Lock()
	b.task = task
	if b.doing != "" {
		task.Doing(b.doing)
	}
	b.mu.Unlock()
	<-b.done
	b.mu.Lock()
	b.task = nil
	b.mu.Unlock()
	if b.err != nil {
		task.Fail()
	}
	return b.value, b.err
}
