/** A sleep that ends early when woken. A wake with nobody sleeping is remembered for the next sleep. */
export class Wake {
  private resolve: (() => void) | null = null;
  private pending = false;

  fire(): void {
    if (this.resolve) {
      const resolve = this.resolve;
      this.resolve = null;
      resolve();
    } else {
      this.pending = true;
    }
  }

  sleep(ms: number): Promise<void> {
    if (this.pending) {
      this.pending = false;
      return Promise.resolve();
    }
    return new Promise((resolve) => {
      const timer = setTimeout(() => {
        this.resolve = null;
        resolve();
      }, ms);
      this.resolve = () => {
        clearTimeout(timer);
        resolve();
      };
    });
  }
}
